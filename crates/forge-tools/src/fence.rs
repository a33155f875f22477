//! The untrusted-content fence: outside content (web pages, HTTP bodies) reaches a model only
//! between markers with a fresh random id, after anything that looks like a marker is neutralised.
//! (To be filled by the browser issue.)
