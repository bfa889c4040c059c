//! Images: disk usage of the image filesystem (and, later, garbage collection).

pub mod disk;
