# Makefile: builds pacefs out of tree (build/, or build-san/ with SAN=...),
# one static library per module, and runs the tests.

PREFIX ?= /usr/local
DESTDIR ?=
SAN ?=

ifeq ($(SAN),)
BUILD ?= build
else
BUILD ?= build-san
endif

CC ?= cc
PKG_CONFIG ?= pkg-config
PKGS := fuse3 libcurl libcrypto lmdb jansson libxxhash libxml-2.0 libmicrohttpd
PKG_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null)

VERSION := 0.1.0
WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wvla
ifneq ($(CI),)
WARN += -Werror
endif
CFLAGS ?= -O2 -g
SANFLAGS := $(if $(SAN),-fsanitize=$(SAN) -fno-omit-frame-pointer -fno-sanitize-recover=all)
# Strict builds abort on a change of state a diagram does not draw, where
# others log it as a bug and refuse it: the sanitizer build is one, and
# any other by hand (make CFLAGS='-O0 -g -DPACEFS_STRICT').
STRICTFLAGS := $(if $(SAN),-DPACEFS_STRICT)
ALL_CFLAGS := -std=c11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 \
	-DFUSE_USE_VERSION=312 -DPACEFS_VERSION='"$(VERSION)"' \
	$(WARN) $(CFLAGS) $(SANFLAGS) $(STRICTFLAGS) -I. -MMD -MP
ALL_LDFLAGS := $(LDFLAGS) $(SANFLAGS) -pthread

.PHONY: all check check-run demo install format clean deps bench bench-quick deb fleet
all: $(BUILD)/pacefs $(BUILD)/pacefs-origin

include pacing/module.mk
include cache/module.mk
include fetch/module.mk
include fs/module.mk
include tests/module.mk
include tests/tools/module.mk
include contrib/origin/module.mk
include tests/fuzz/module.mk
include contrib/bench/module.mk

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) $(PKG_CFLAGS) -c $< -o $@

# Made anew: ar keeps the members of an existing archive, so an object of
# a source since removed would still be linked.
$(BUILD)/lib%.a:
	@mkdir -p $(dir $@)
	@rm -f $@
	$(AR) rcs $@ $^

deps:
	contrib/install-deps.sh

# check and demo install what they need first, then re-read this Makefile so
# that pkg-config sees the freshly installed libraries.
check: deps
	+$(MAKE) --no-print-directory check-run

check-run: all $(TEST_BINS) $(TEST_TOOLS) $(BENCH_TOOLS)
	tests/run.sh $(BUILD)

demo: deps
	+$(MAKE) --no-print-directory all
	contrib/demo.sh $(BUILD)/pacefs

# The side-by-side bench (contrib/bench/README.md): the full run writes
# docs/bench/ and the README's headline table, over two hours; the quick
# one runs every workload on small data into $(BUILD)/bench-quick/ in
# minutes. BENCH_ONLY="seq_lo zip ..." runs a subset.
bench:
	contrib/install-deps.sh --bench
	+$(MAKE) --no-print-directory all $(BENCH_TOOLS)
	/usr/bin/python3 contrib/bench/bench.py $(BUILD)/pacefs

bench-quick:
	contrib/install-deps.sh --bench
	+$(MAKE) --no-print-directory all $(BENCH_TOOLS)
	/usr/bin/python3 contrib/bench/bench.py --quick $(BUILD)/pacefs

# Sixteen machines in network namespaces behind a cache tier, about 4
# minutes (tests/fleet/fleet.sh; FLEET_OUT=FILE keeps its table rows).
fleet: deps
	+$(MAKE) --no-print-directory all $(BUILD)/tests/readcmp
	FLEET_SPEED=1 PACEFS=$(BUILD)/pacefs tests/fleet/fleet.sh

# pacefs_VERSION_ARCH.deb into $(BUILD)/, lintian-checked (contrib/deb.sh).
deb: deps
	contrib/deb.sh $(BUILD)

install: $(BUILD)/pacefs
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 0755 $(BUILD)/pacefs $(DESTDIR)$(PREFIX)/bin/pacefs
	install -m 0644 docs/pacefs.1 $(DESTDIR)$(PREFIX)/share/man/man1/pacefs.1
	install -d $(DESTDIR)$(PREFIX)/lib/python3/dist-packages
	install -m 0644 contrib/python/pacefs_plan.py \
		$(DESTDIR)$(PREFIX)/lib/python3/dist-packages/pacefs_plan.py

# Every C source and header at any depth: the tracked ones in a git work
# tree, else (an unpacked tarball, where git lists none) every one outside
# build output and the package's staging folders.
FORMAT_SRCS = $(shell git ls-files '*.c' '*.h' 2>/dev/null | grep . || \
	find . \( -path ./.git -o -path './build*' -o -path ./debian \) -prune -o \
	\( -name '*.c' -o -name '*.h' \) -print)

format:
	$(if $(FORMAT_SRCS),clang-format -i $(FORMAT_SRCS),@echo 'format: no C file found' >&2; exit 1)

clean:
	rm -rf build build-san

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
