"""The tooling around the API, not the API: the ``amari-gpu`` command line (``cli``), the
demo, the doctor, the benchmarks (``bench_host``, ``bench_families``) and the scaling study
(``scaling``, ``scaling_report``, with its ``progress`` bar).

Nothing in the package root imports these modules, so ``import amari_gpu`` never loads them;
the API lives in the package root (``amari_gpu.MultiGpuContext`` and friends).
"""
