//! (To be written.)
