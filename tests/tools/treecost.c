/* treecost: what each step of a manifest mount's tree costs, outside a
 * mount: the JSON document alone, the parsed manifest, the namespace built
 * from it as the driver's build_tree builds it, and what is left once the
 * manifest is freed; time, glibc's heap in use (mallinfo2) and the
 * process's RSS after each, and the sizes a node's parts take. Not part of
 * make check (docs/fs-notes.md, "What a tree entry costs"). */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "fs/tree/tree.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long rss_kib(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "VmRSS: %ld", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static double t_last;

/* One line: the step, its seconds, the heap in use (small chunks and
 * mmapped ones) and the RSS, in MiB and in bytes an entry. */
static void step(const char *what, double n)
{
	double t = now_s();
	struct mallinfo2 mi = mallinfo2();
	double heap = (double)mi.uordblks + (double)mi.hblkhd;

	printf("%-34s %7.3f s  heap %8.1f MiB (%6.1f B/entry)  rss %8.1f MiB "
	       "(%6.1f B/entry)\n",
	       what, t - t_last, heap / 1048576.0, heap / n,
	       (double)rss_kib() / 1024.0, (double)rss_kib() * 1024.0 / n);
	t_last = now_s();
}

static int read_file(const char *path, char **out, size_t *len)
{
	struct stat st;
	char *buf;
	size_t got = 0;
	int fd = open(path, O_RDONLY);

	if (fd < 0 || fstat(fd, &st) != 0)
		return -errno;
	buf = malloc((size_t)st.st_size + 1);
	if (buf == NULL)
		return -ENOMEM;
	while (got < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);

		if (r <= 0)
			return -EIO;
		got += (size_t)r;
	}
	close(fd);
	*out = buf;
	*len = got;
	return 0;
}

int main(int argc, char **argv)
{
	struct tree_manifest m = {0};
	struct tree_ns *ns;
	json_error_t jerr;
	json_t *doc;
	char err[512], *text = NULL;
	size_t len = 0;
	uint64_t children = 0, index = 0, nodes_cap = 0;
	double n;

	if (argc != 2) {
		fprintf(stderr, "usage: treecost MANIFEST.json\n");
		return 2;
	}
	printf("sizeof: tree_node %zu, tree_dir %zu, tree_file %zu, "
	       "tree_manifest_entry %zu\n",
	       sizeof(struct tree_node), sizeof(struct tree_dir),
	       sizeof(struct tree_file), sizeof(struct tree_manifest_entry));
	t_last = now_s();
	if (read_file(argv[1], &text, &len) != 0) {
		fprintf(stderr, "treecost: cannot read %s\n", argv[1]);
		return 1;
	}
	n = 1;
	step("manifest's bytes read", n);
	doc = json_loadb(text, len,
			 JSON_REJECT_DUPLICATES | JSON_DECODE_ANY |
				 JSON_ALLOW_NUL,
			 &jerr);
	if (doc == NULL) {
		fprintf(stderr, "treecost: %s\n", jerr.text);
		return 1;
	}
	n = (double)json_array_size(json_object_get(doc, "files"));
	step("jansson document (json_loadb)", n);
	json_decref(doc);
	step("jansson document freed", n);
	if ((getenv("TREECOST_LOAD") != NULL
		     ? tree_manifest_load(argv[1], &m, err, sizeof(err))
		     : tree_manifest_parse(text, len, &m, err, sizeof(err))) !=
	    0) {
		fprintf(stderr, "treecost: %s\n", err);
		return 1;
	}
	step("tree_manifest_parse (doc freed)", n);
	free(text);
	step("manifest's bytes freed", n);
	if (getenv("TREECOST_MALLOPT") != NULL) {
		/* What the daemon sets before it builds the tree (serve.c). */
		mallopt(M_MMAP_THRESHOLD, 8 * 1024 * 1024);
		mallopt(M_TRIM_THRESHOLD, 128 * 1024 * 1024);
	}
	if (tree_ns_new(&ns) != 0)
		return 1;
	/* As the driver's build_tree does. */
	for (uint32_t i = 0; i < m.nfiles; i++) {
		struct tree_manifest_entry *me = &m.files[i];
		struct tree_node *nd;
		uint32_t id;

		if (tree_ns_add_path(ns, me->path, &id) != 0)
			return 1;
		nd = tree_ns_get(ns, id);
		nd->has_size = me->has_size;
		nd->size = me->size;
		if (tree_ns_set_urls(ns, id, me->urls, me->nurls) != 0)
			return 1;
		me->urls = NULL;
		me->nurls = 0;
	}
	step("namespace built (manifest kept)", n);
	tree_manifest_free(&m);
	step("manifest freed", n);
	malloc_trim(0);
	step("malloc_trim(0)", n);
	for (uint32_t i = 0; i < ns->n; i++) {
		struct tree_node *d = tree_ns_get(ns, i);

		if (!d->is_dir)
			continue;
		children += (uint64_t)d->dir->cap_children * sizeof(uint32_t);
		index += (uint64_t)d->dir->nindex * sizeof(uint32_t);
		nodes_cap += malloc_usable_size(d->dir) + 8;
	}
	{
		struct tree_node *f = tree_ns_get(ns, ns->n - 1);
		struct tree_usage u;
		char *url = tree_ns_url(ns, ns->n - 1, 0);

		printf("a file %s: record %zu bytes, name %zu bytes, its own "
		       "record of URLs %s, url composed %s\n",
		       f->name, sizeof(*f), strlen(f->name) + 1,
		       f->file == NULL ? "none" : "one",
		       url != NULL ? url : "(none)");
		free(url);
		tree_ns_usage(ns, &u);
		printf("tree_ns_usage: %.1f MiB, %.1f B an entry\n",
		       (double)u.bytes / 1048576.0, (double)u.bytes / n);
	}
	printf("per entry: directories' records %.1f B, children arrays "
	       "%.1f B, name tables %.1f B (%u nodes)\n",
	       (double)nodes_cap / n, (double)children / n, (double)index / n,
	       ns->n);
	tree_ns_free(ns);
	return 0;
}
