// The WebDAV provider; see docs/ARCHITECTURE.md.
