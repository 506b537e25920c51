//! Tropical (max-plus and min-plus) matrix products, matrix-vector products and all-pairs
//! shortest paths.
