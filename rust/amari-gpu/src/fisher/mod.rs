//! Information geometry: empirical Fisher information from per-sample scores, and the
//! Fisher information of categorical and Gaussian families.
