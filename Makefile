# cloudsync — the two commands of README: `make demo` and `make test`.
SWIFT ?= swift
PREFIX ?= $(HOME)/.local
BINDIR ?= $(PREFIX)/bin
.PHONY: demo test build release deps bench clean install

deps:
	@scripts/install-deps.sh

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release

## Builds in release mode and installs the binary as $(DESTDIR)$(BINDIR)/cloudsync (PREFIX defaults to ~/.local).
install: release
	install -D -m 0755 .build/release/cloudsync $(DESTDIR)$(BINDIR)/cloudsync

## Installs what is missing, builds in release mode, serves a generated library over WebDAV and pulls it.
demo: release
	@demo/run-demo.sh

## Installs what is missing and runs the whole test suite (unit, fakes, real WebDAV servers).
test: deps
	$(SWIFT) build --build-tests
	scripts/run-tests.sh

## Side-by-side benchmarks with curl, aria2c and rclone (see bench/README.md).
bench: release
	@scripts/install-deps.sh --bench
	@bench/run-all.sh

clean:
	rm -rf .build demo/run
