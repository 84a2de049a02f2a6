// The OneDrive provider; see docs/ARCHITECTURE.md.
