// The Dropbox provider; see docs/ARCHITECTURE.md.
