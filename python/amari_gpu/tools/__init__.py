"""The tooling around the API, not the API: the ``amari-gpu`` command line (``cli``), the
demo, the doctor, the benchmarks (``bench_host``, ``bench_families``) and the scaling study
(``scaling``, ``scaling_report``, with its ``progress`` bar).

No API module imports them, so ``import amari_gpu`` never loads them; the API is the package
root (``amari_gpu.MultiGpuContext`` and friends).
"""
