//! Pod sources and their merge: the file source (a manifest directory) and
//! the URL source, each reporting SETs that `merge` folds into adds,
//! updates and removes.
//! May import `pod` and `units` only.

pub mod file;
pub mod http;
pub mod merge;
pub mod trust;
