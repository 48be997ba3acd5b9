// SPDX-License-Identifier: GPL-2.0
/* tcpdelay-cc-load: register one tcpdelay congestion control (bpf/cc/<variant>.bpf.o) under a
 * kernel name of its own, with its parameters, for as long as this process lives.
 *
 *   tcpdelay-cc-load OBJECT KERNEL_NAME [PARAM=VALUE ...]
 *
 * The ops struct's name placeholder (TDCC_NAME, bpf/cc/tdcc.h) is replaced by KERNEL_NAME, each
 * PARAM sets the program's `const volatile` global param_<PARAM> before loading, and the
 * algorithm is registered through a BPF link (struct_ops map with BPF_F_LINK, then
 * BPF_LINK_CREATE): the kernel unregisters it when the link's last fd closes, i.e. when this
 * process exits, however it exits (SIGKILL included). When registered it prints one JSON line
 * {"name", "map_id", "link_id", "state_map_id"} and waits until its stdin reaches end of file
 * (its parent died or let go) or a signal ends it. Errors: one line on stderr; exit status 2
 * for bad arguments, 1 when the kernel or libbpf refused.
 *
 * Kernels before 6.4 (a reference-kernel guest's 6.1) have no struct_ops links: there the ops
 * are registered by the map update itself (libbpf's bpf_map__attach_struct_ops), "link_id" is 0,
 * and the registration is removed when stdin ends or on SIGTERM/SIGINT, but outlives a SIGKILL
 * (the guest it runs in goes with its testbed; on a host `tcpdelay testbed clean` removes it).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/utsname.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#ifndef BPF_F_LINK
#define BPF_F_LINK (1U << 13)
#endif
/* enum bpf_attach_type: BPF_STRUCT_OPS is 44 from Linux 6.4 (Debian 12's uapi headers are 6.1). */
#define TDCC_ATTACH_STRUCT_OPS 44

#define PLACEHOLDER "tdcc_name_xxxxx"
#define NAME_LEN 16

static char last_msg[512];
static int verbose; /* TCPDELAY_CC_VERBOSE set: every libbpf message (the verifier's log) to stderr */

static int on_libbpf(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char line[512];
	size_t n;

	if (verbose) {
		va_list copy;

		va_copy(copy, ap);
		vfprintf(stderr, fmt, copy);
		va_end(copy);
	}
	if (level == LIBBPF_DEBUG)
		return 0;
	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	while (n && (line[n - 1] == '\n' || line[n - 1] == ' '))
		line[--n] = 0;
	if (n)
		snprintf(last_msg, sizeof(last_msg), "%s", line);
	return 0;
}

static void die(int code, const char *fmt, ...)
{
	va_list ap;

	fputs("tcpdelay-cc-load: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(code);
}

static int valid_name(const char *s)
{
	size_t n = strlen(s);

	if (n < 1 || n >= NAME_LEN)
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
			return 0;
	return 1;
}

static char *read_file(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (!f)
		die(2, "%s: %s", path, strerror(errno));
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc(n > 0 ? n : 1);
	if (!buf || fread(buf, 1, n, f) != (size_t)n)
		die(1, "%s: cannot read", path);
	fclose(f);
	*size = n;
	return buf;
}

static void set_name(char *buf, size_t size, const char *name, const char *path)
{
	char want[NAME_LEN] = PLACEHOLDER, put[NAME_LEN] = {0};
	char *hit = NULL, *p = buf;
	size_t left = size;

	while (left >= NAME_LEN && (p = memmem(p, left, want, NAME_LEN))) {
		if (hit)
			die(2, "%s: the name placeholder occurs more than once", path);
		hit = p;
		p += NAME_LEN;
		left = size - (p - buf);
	}
	if (!hit)
		die(2, "%s: no name placeholder %s (not a tcpdelay congestion control?)", path, PLACEHOLDER);
	strncpy(put, name, NAME_LEN - 1);
	memcpy(hit, put, NAME_LEN);
}

static struct bpf_map *map_of_type(struct bpf_object *obj, enum bpf_map_type type, const char *suffix)
{
	struct bpf_map *m;

	bpf_object__for_each_map(m, obj) {
		const char *n = bpf_map__name(m);
		size_t ln = strlen(n), ls = suffix ? strlen(suffix) : 0;

		if (bpf_map__type(m) != type)
			continue;
		if (!suffix || (ln >= ls && !strcmp(n + ln - ls, suffix)))
			return m;
	}
	return NULL;
}

/* Every param_<name> global of .rodata, for the message of an unknown one. */
static void param_names(const struct btf *btf, const struct btf_type *sec, char *out, size_t len)
{
	const struct btf_var_secinfo *vs = btf_var_secinfos(sec);
	int i;

	out[0] = 0;
	for (i = 0; i < btf_vlen(sec); i++, vs++) {
		const char *vn = btf__name_by_offset(btf, btf__type_by_id(btf, vs->type)->name_off);

		if (!strncmp(vn, "param_", 6)) {
			if (out[0])
				strncat(out, ", ", len - strlen(out) - 1);
			strncat(out, vn + 6, len - strlen(out) - 1);
		}
	}
	if (!out[0])
		snprintf(out, len, "none");
}

static void set_param(struct bpf_object *obj, const char *arg, const char *path)
{
	const char *eq = strchr(arg, '=');
	char key[128], allowed[512], *end;
	const struct btf *btf = bpf_object__btf(obj);
	const struct btf_type *sec = NULL;
	const struct btf_var_secinfo *vs;
	struct bpf_map *rodata = map_of_type(obj, BPF_MAP_TYPE_ARRAY, ".rodata");
	unsigned long long value;
	size_t size = 0;
	char *data;
	int id, i;

	if (!eq || eq == arg || (size_t)(eq - arg) >= sizeof(key) - 7)
		die(2, "%s: a parameter is NAME=VALUE", arg);
	snprintf(key, sizeof(key), "param_%.*s", (int)(eq - arg), arg);
	errno = 0;
	value = strtoull(eq + 1, &end, 10);
	if (errno || !eq[1] || *end || eq[1] == '-')
		die(2, "%s: the value must be an unsigned integer", arg);
	if (btf) {
		id = btf__find_by_name_kind(btf, ".rodata", BTF_KIND_DATASEC);
		if (id > 0)
			sec = btf__type_by_id(btf, id);
	}
	if (!sec || !rodata)
		die(2, "%.*s: %s has no parameters", (int)(eq - arg), arg, path);
	data = (char *)bpf_map__initial_value(rodata, &size);
	vs = btf_var_secinfos(sec);
	for (i = 0; i < btf_vlen(sec); i++, vs++) {
		const char *vn = btf__name_by_offset(btf, btf__type_by_id(btf, vs->type)->name_off);

		if (strcmp(vn, key))
			continue;
		if (!data || vs->offset + vs->size > size)
			die(1, "%s: cannot set %s", path, key);
		if (vs->size == 4) {
			unsigned int v32 = (unsigned int)value;

			if (value > 0xffffffffULL)
				die(2, "%s: the value is more than 32 bits", arg);
			memcpy(data + vs->offset, &v32, 4);
		} else if (vs->size == 8) {
			memcpy(data + vs->offset, &value, 8);
		} else {
			die(1, "%s: %s is %u bytes, not an integer of 4 or 8", path, key, vs->size);
		}
		return;
	}
	param_names(btf, sec, allowed, sizeof(allowed));
	die(2, "no parameter %.*s in %s; allowed: %s", (int)(eq - arg), arg, path, allowed);
}

/* Whether the running kernel registers struct_ops through a link (BPF_F_LINK, Linux 6.4). */
static int kernel_has_struct_ops_link(void)
{
	struct utsname u;
	int major = 0, minor = 0;

	if (uname(&u) || sscanf(u.release, "%d.%d", &major, &minor) != 2)
		return 1;
	return major > 6 || (major == 6 && minor >= 4);
}

static volatile sig_atomic_t stop;

static void on_stop(int sig)
{
	(void)sig;
	stop = 1;
}

static unsigned int map_id(int fd)
{
	struct bpf_map_info info = {0};
	__u32 len = sizeof(info);

	return bpf_obj_get_info_by_fd(fd, &info, &len) ? 0 : info.id;
}

static unsigned int link_id(int fd)
{
	struct bpf_link_info info = {0};
	__u32 len = sizeof(info);

	return bpf_obj_get_info_by_fd(fd, &info, &len) ? 0 : info.id;
}

int main(int argc, char **argv)
{
	struct bpf_object *obj;
	struct bpf_map *ops, *state;
	struct bpf_link *attached;
	char *buf, c;
	size_t size;
	int i, err, link_fd = -1, linked;

	if (argc < 3)
		die(2, "usage: tcpdelay-cc-load OBJECT KERNEL_NAME [PARAM=VALUE ...]");
	if (!valid_name(argv[2]))
		die(2, "%s: a kernel name is 1 to 15 characters of a-z, 0-9 and _", argv[2]);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	verbose = getenv("TCPDELAY_CC_VERBOSE") != NULL;
	libbpf_set_print(on_libbpf);

	buf = read_file(argv[1], &size);
	set_name(buf, size, argv[2], argv[1]);
	obj = bpf_object__open_mem(buf, size, NULL);
	if (!obj)
		die(1, "%s: cannot open: %s", argv[1], last_msg[0] ? last_msg : strerror(errno));
	ops = map_of_type(obj, BPF_MAP_TYPE_STRUCT_OPS, NULL);
	if (!ops)
		die(2, "%s: no struct_ops map (not a congestion control)", argv[1]);
	for (i = 3; i < argc; i++)
		set_param(obj, argv[i], argv[1]);
	linked = kernel_has_struct_ops_link();
	if (linked && bpf_map__set_map_flags(ops, bpf_map__map_flags(ops) | BPF_F_LINK))
		die(1, "%s: cannot ask for a BPF link", argv[1]);
	err = bpf_object__load(obj);
	if (err)
		die(1, "%s: the kernel refused it: %s", argv[1], last_msg[0] ? last_msg : strerror(-err));
	/* With BPF_F_LINK the update stores the ops without registering them; the link registers.
	 * Without (before 6.4) the update registers them. */
	attached = bpf_map__attach_struct_ops(ops);
	if (!attached) {
		if (!linked && errno == EEXIST)
			die(1, "%s: a congestion control named %s is registered already", argv[1], argv[2]);
		die(1, "%s: cannot store its ops: %s", argv[1], last_msg[0] ? last_msg : strerror(errno));
	}
	if (linked) {
		link_fd = bpf_link_create(bpf_map__fd(ops), 0, TDCC_ATTACH_STRUCT_OPS, NULL);
		if (link_fd < 0) {
			if (errno == EEXIST)
				die(1, "%s: a congestion control named %s is registered already", argv[1], argv[2]);
			die(1, "%s: cannot register %s: %s", argv[1], argv[2], strerror(errno));
		}
	} else {
		struct sigaction sa = {0};

		sa.sa_handler = on_stop; /* no SA_RESTART: the read below returns */
		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGINT, &sa, NULL);
	}
	state = bpf_object__find_map_by_name(obj, "tdcc_state");
	printf("{\"name\": \"%s\", \"map_id\": %u, \"link_id\": %u, \"state_map_id\": ", argv[2],
	       map_id(bpf_map__fd(ops)), linked ? link_id(link_fd) : 0);
	if (state && map_id(bpf_map__fd(state)))
		printf("%u}\n", map_id(bpf_map__fd(state)));
	else
		printf("null}\n");
	fflush(stdout);
	while (!stop && read(0, &c, 1) > 0)
		;
	if (linked)
		close(link_fd); /* the kernel unregisters it (it would on exit anyway) */
	else
		bpf_link__destroy(attached); /* deletes the map's element: unregisters */
	return 0;
}
