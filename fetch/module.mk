# fetch: range transfers over libcurl's multi interface.
FETCH_SRCS := fetch/fetch.c fetch/slot.c fetch/slotstate.c fetch/http.c \
	fetch/probe.c fetch/redirect.c fetch/auth.c \
	fetch/url.c fetch/proxy.c fetch/count.c fetch/ack.c fetch/keep.c
$(BUILD)/libfetch.a: $(FETCH_SRCS:%.c=$(BUILD)/%.o)
