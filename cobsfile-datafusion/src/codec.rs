//! Ballista codecs: the next commit.
