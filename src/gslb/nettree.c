/*
 * Binary trie from client address to value, built by overlays and frozen into a compact,
 * read-only array (see nettree.h for the contract). Builders are used by one thread at a time
 * (config/reload); frozen trees are read by every query thread without locks.
 *
 * Representation, shared by builder and frozen tree: a node is two 32-bit child references.
 * A reference with REF_LEAF set is a leaf: the value is in its low 24 bits; otherwise it is the
 * index of a node. A leaf at depth d stands for the whole d-bit block, so after merging (two
 * equal leaf children become one leaf) the depth at which a lookup meets its leaf is the ECS
 * scope. 8 bytes per node and no per-node malloc keep a 500,000-CIDR map in a few MiB.
 *
 * The IPv4 tree is built separately; at freeze its root reference is stored at the
 * ::ffff:0:0/96 position of the IPv6 tree (and at the folded 6to4/NAT64 positions), so the
 * frozen structure is a DAG whose IPv6 walk continues through the IPv4 nodes while reading the
 * embedded IPv4 bits of the IPv6 address; no special case is needed in the walk.
 *
 * Stride tables: for big trees the first k (<= 16) levels below each root are flattened into a
 * 2^k array of references. Table entries that are leaves met above depth k also carry that
 * depth (bits 24..30), which is why values are limited to 24 bits.
 */
#include "gslb/nettree.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"

#define REF_LEAF        0x80000000u
#define REF_VALUE_MASK  0x00ffffffu
#define REF_DEPTH_SHIFT 24
#define REF_DEPTH_MASK  0x7fu
/* Placeholder leaf marking where the IPv4 tree is linked in; never a valid value. */
#define REF_GRAFT (REF_LEAF | 0x7fffffffu)
#define NODE_NONE UINT32_MAX
/* Node indices must never have REF_LEAF set. */
#define NODES_MAX (REF_LEAF - 1)
/* A big tree's stride table costs at most 1/8 of its nodes' memory (2^(log2 n - 2) entries of
 * 4 bytes against n nodes of 8); 16 bits covers an IPv4 /16 per entry. */
#define STRIDE_MAX_BITS  16
#define STRIDE_MIN_NODES 256u

typedef struct {
	uint32_t child[2];
} nt_node_t;

/* A range of IPv6 space linked to the IPv4 tree: prefix, length, bit offset of the IPv4
 * address inside the IPv6 address (always byte aligned). */
typedef struct {
	unsigned flag;
	uint8_t prefix[16];
	uint8_t len;
	uint8_t v4_offset;
} nt_fold_t;

static const nt_fold_t nt_folds[] = {
    {0, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}, 96, 96}, /* IPv4-mapped: always */
    {GSLB_NETTREE_FOLD_6TO4, {0x20, 0x02}, 16, 16},
    {GSLB_NETTREE_FOLD_NAT64, {0, 0x64, 0xff, 0x9b}, 96, 96},
};

struct gslb_nettree_builder {
	nt_node_t *nodes; /* owned; the pool, grown by doubling */
	uint32_t used;    /* nodes handed out from the pool, live or on the free list */
	uint32_t cap;
	uint32_t live;      /* nodes in the trees */
	uint32_t free_head; /* free list linked through child[0], NODE_NONE when empty */
	uint32_t root4, root6;
	uint32_t default_value;
	unsigned fold; /* GSLB_NETTREE_FOLD_* */
	bool touched;  /* a prefix was set: folds can no longer change */
};

/* One stride table over the first @bits levels below a root. */
typedef struct {
	uint32_t *refs; /* owned; 2^bits entries, NULL when bits == 0 */
	uint32_t root;
	unsigned bits;
} nt_stride_t;

struct gslb_nettree {
	nt_node_t *nodes; /* owned */
	size_t n_nodes;
	nt_stride_t v4, v6;
	uint32_t default_value;
	/* Where the walk of ::ffff:0:0 meets the IPv4 tree: when the IPv4 root is a leaf it may
	 * have merged above depth 96, and mapped_ref/mapped_depth hold that leaf. */
	uint32_t mapped_ref;
	uint8_t mapped_depth;
};

static inline unsigned addr_bit(const uint8_t *addr, unsigned bit)
{
	return (addr[bit >> 3] >> (7 - (bit & 7))) & 1;
}

static uint32_t node_alloc(gslb_nettree_builder_t *b, uint32_t leaf)
{
	uint32_t n;
	if (b->free_head != NODE_NONE) {
		n = b->free_head;
		b->free_head = b->nodes[n].child[0];
	} else {
		if (b->used == b->cap) {
			STEER_ASSERT(b->cap <= NODES_MAX / 2);
			b->cap *= 2;
			b->nodes = xrealloc(b->nodes, (size_t)b->cap * sizeof(*b->nodes));
		}
		n = b->used++;
	}
	b->nodes[n].child[0] = leaf;
	b->nodes[n].child[1] = leaf;
	b->live++;
	return n;
}

static void node_release(gslb_nettree_builder_t *b, uint32_t n)
{
	b->nodes[n].child[0] = b->free_head;
	b->free_head = n;
	b->live--;
}

/* Recursion depth is bounded by the 128-bit address length. */
static void subtree_release(gslb_nettree_builder_t *b, uint32_t ref)
{
	if (ref & REF_LEAF)
		return;
	subtree_release(b, b->nodes[ref].child[0]);
	subtree_release(b, b->nodes[ref].child[1]);
	node_release(b, ref);
}

/* Slot holding the reference of the node at path[d] (path[0] is the root slot's owner). */
static uint32_t *slot_of(gslb_nettree_builder_t *b, uint32_t *root, const uint32_t *path,
                         const uint8_t *addr, unsigned d)
{
	return d == 0 ? root : &b->nodes[path[d - 1]].child[addr_bit(addr, d - 1)];
}

/*
 * Write @leaf at the @len-bit block of @addr in the tree at *@root. Leaves on the way are split
 * into two copies of themselves; afterwards parents whose children became equal leaves are
 * merged again, so the builder tree stays fully merged and no node is spent on uniform space.
 * @merge is false only for the graft placeholder, which must stay where it is put.
 */
static void tree_write(gslb_nettree_builder_t *b, uint32_t *root, const uint8_t *addr, unsigned len,
                       uint32_t leaf, bool merge)
{
	uint32_t path[128];
	path[0] = NODE_NONE; /* only read when len > 0; silences -Wmaybe-uninitialized */
	unsigned d;
	for (d = 0; d < len; d++) {
		uint32_t *slot = slot_of(b, root, path, addr, d);
		if (*slot & REF_LEAF) {
			if (*slot == leaf)
				return; /* the whole block already has the value */
			uint32_t n = node_alloc(b, *slot);
			slot = slot_of(b, root, path, addr, d); /* the pool may have moved */
			*slot = n;
		}
		path[d] = *slot;
	}
	uint32_t *slot = slot_of(b, root, path, addr, len);
	uint32_t old = *slot;
	*slot = leaf;
	subtree_release(b, old);
	while (merge && d-- > 0) {
		const nt_node_t *n = &b->nodes[path[d]];
		if (!(n->child[0] & REF_LEAF) || n->child[0] != n->child[1])
			break;
		slot = slot_of(b, root, path, addr, d);
		*slot = n->child[0];
		node_release(b, path[d]);
	}
}

gslb_nettree_builder_t *gslb_nettree_builder_new(uint32_t default_value)
{
	STEER_ASSERT(default_value <= GSLB_NETTREE_VALUE_MAX);
	gslb_nettree_builder_t *b = xcalloc(1, sizeof(*b));
	b->cap = 1024;
	b->nodes = xmalloc((size_t)b->cap * sizeof(*b->nodes));
	b->free_head = NODE_NONE;
	b->root4 = REF_LEAF | default_value;
	b->root6 = REF_LEAF | default_value;
	b->default_value = default_value;
	return b;
}

int gslb_nettree_builder_fold(gslb_nettree_builder_t *b, unsigned flags)
{
	if (b->touched || (flags & ~(GSLB_NETTREE_FOLD_6TO4 | GSLB_NETTREE_FOLD_NAT64)))
		return STEER_EINVAL;
	b->fold = flags;
	return 0;
}

void gslb_nettree_builder_free(gslb_nettree_builder_t *b)
{
	if (b == NULL)
		return;
	free(b->nodes);
	free(b);
}

static bool prefix_within(const uint8_t *addr, unsigned len, const nt_fold_t *f)
{
	if (len < f->len)
		return false;
	for (unsigned bit = 0; bit < f->len; bit++) {
		if (addr_bit(addr, bit) != addr_bit(f->prefix, bit))
			return false;
	}
	return true;
}

/* Where a prefix is written: the tree (4 or 6), its address bytes and its length there. */
typedef struct {
	uint8_t addr[16];
	unsigned len;
	bool v4;
} nt_target_t;

static int resolve(const gslb_nettree_builder_t *b, const steer_prefix_t *p, nt_target_t *out)
{
	memset(out, 0, sizeof(*out));
	if (p->family == AF_INET) {
		if (p->len > 32)
			return STEER_EINVAL;
		memcpy(out->addr, p->addr, 4);
		out->len = p->len;
		out->v4 = true;
		return 0;
	}
	if (p->family != AF_INET6 || p->len > 128)
		return STEER_EINVAL;
	for (size_t i = 0; i < STEER_ARRAY_LEN(nt_folds); i++) {
		const nt_fold_t *f = &nt_folds[i];
		if ((f->flag && !(b->fold & f->flag)) || !prefix_within(p->addr, p->len, f))
			continue;
		if (p->len > f->v4_offset + 32u)
			return STEER_ERANGE;
		memcpy(out->addr, p->addr + f->v4_offset / 8, 4);
		out->len = p->len - f->v4_offset;
		out->v4 = true;
		return 0;
	}
	memcpy(out->addr, p->addr, 16);
	out->len = p->len;
	return 0;
}

static void apply(gslb_nettree_builder_t *b, const nt_target_t *t, uint32_t value)
{
	b->touched = true;
	tree_write(b, t->v4 ? &b->root4 : &b->root6, t->addr, t->len, REF_LEAF | value, true);
}

int gslb_nettree_set(gslb_nettree_builder_t *b, const steer_prefix_t *prefix, uint32_t value)
{
	nt_target_t t;
	int ret = resolve(b, prefix, &t);
	if (ret != 0)
		return ret;
	if (value > GSLB_NETTREE_VALUE_MAX)
		return STEER_ERANGE;
	apply(b, &t, value);
	return 0;
}

int gslb_nettree_set_nets(gslb_nettree_builder_t *b, const gslb_nettree_entry_t *entries, size_t n,
                          size_t *bad)
{
	/* Counting sort by effective length (0..128), stable, so ties keep input order. */
	size_t start[130] = {0};
	STEER_ASSERT(n <= UINT32_MAX);
	uint8_t *lens = xmalloc(n);
	int ret = 0;
	for (size_t i = 0; i < n; i++) {
		nt_target_t t;
		ret = resolve(b, &entries[i].prefix, &t);
		if (ret == 0 && entries[i].value > GSLB_NETTREE_VALUE_MAX)
			ret = STEER_ERANGE;
		if (ret != 0) {
			if (bad)
				*bad = i;
			free(lens);
			return ret;
		}
		lens[i] = (uint8_t)t.len;
		start[t.len + 1]++;
	}
	for (unsigned l = 1; l < 130; l++)
		start[l] += start[l - 1];
	uint32_t *order = xmalloc((n ? n : 1) * sizeof(*order));
	for (size_t i = 0; i < n; i++)
		order[start[lens[i]]++] = (uint32_t)i;
	free(lens);
	for (size_t i = 0; i < n; i++) {
		nt_target_t t;
		const gslb_nettree_entry_t *e = &entries[order[i]];
		ret = resolve(b, &e->prefix, &t);
		STEER_ASSERT(ret == 0);
		apply(b, &t, e->value);
	}
	free(order);
	return 0;
}

/* Plant the IPv4 graft placeholders into the IPv6 tree, over whatever IPv6 prefixes put there. */
static void plant_grafts(gslb_nettree_builder_t *b)
{
	for (size_t i = 0; i < STEER_ARRAY_LEN(nt_folds); i++) {
		const nt_fold_t *f = &nt_folds[i];
		if (f->flag == 0 || (b->fold & f->flag))
			tree_write(b, &b->root6, f->prefix, f->len, REF_GRAFT, false);
	}
}

typedef struct {
	const gslb_nettree_builder_t *b;
	nt_node_t *out;
	uint32_t n;
	uint32_t graft; /* frozen reference of the IPv4 root */
} nt_freeze_t;

/* Post-order copy into the frozen array, merging equal leaf siblings (depth <= 128). */
static uint32_t freeze(nt_freeze_t *fz, uint32_t ref)
{
	if (ref & REF_LEAF)
		return ref == REF_GRAFT ? fz->graft : ref;
	uint32_t l = freeze(fz, fz->b->nodes[ref].child[0]);
	uint32_t r = freeze(fz, fz->b->nodes[ref].child[1]);
	if (l == r && (l & REF_LEAF))
		return l;
	fz->out[fz->n].child[0] = l;
	fz->out[fz->n].child[1] = r;
	return fz->n++;
}

static unsigned stride_bits(size_t nodes)
{
	if (nodes < STRIDE_MIN_NODES)
		return 0;
	unsigned log2 = 0;
	while ((nodes >> (log2 + 1)) != 0)
		log2++;
	return log2 - 2 < STRIDE_MAX_BITS ? log2 - 2 : STRIDE_MAX_BITS;
}

/* Fill the entries for the @depth-bit block @index below the table root with @ref. */
static void stride_fill(const nt_node_t *nodes, nt_stride_t *s, uint32_t ref, unsigned depth,
                        uint32_t index)
{
	if ((ref & REF_LEAF) || depth == s->bits) {
		uint32_t entry = ref;
		if (ref & REF_LEAF)
			entry = REF_LEAF | (depth << REF_DEPTH_SHIFT) | (ref & REF_VALUE_MASK);
		uint32_t first = index << (s->bits - depth), count = 1u << (s->bits - depth);
		for (uint32_t i = 0; i < count; i++)
			s->refs[first + i] = entry;
		return;
	}
	stride_fill(nodes, s, nodes[ref].child[0], depth + 1, index << 1);
	stride_fill(nodes, s, nodes[ref].child[1], depth + 1, (index << 1) | 1);
}

static void stride_init(const nt_node_t *nodes, nt_stride_t *s, uint32_t root, size_t n_nodes)
{
	s->root = root;
	s->bits = (root & REF_LEAF) ? 0 : stride_bits(n_nodes);
	s->refs = NULL;
	if (s->bits == 0)
		return;
	s->refs = xmalloc(((size_t)1 << s->bits) * sizeof(*s->refs));
	stride_fill(nodes, s, root, 0, 0);
}

/* Walk from @ref at @bit until a leaf; the bit count reached is the scope. */
static inline uint32_t walk(const nt_node_t *nodes, uint32_t ref, const uint8_t *addr, unsigned bit,
                            unsigned maxbits, uint8_t *scope)
{
	while (!(ref & REF_LEAF)) {
		/* Construction bounds the depth by the address length; a violation would read
		 * past the caller's address, so it stays checked (a predictable branch). */
		STEER_ASSERT(bit < maxbits);
		ref = nodes[ref].child[addr_bit(addr, bit)];
		bit++;
	}
	*scope = (uint8_t)bit;
	return ref & REF_VALUE_MASK;
}

static inline uint32_t stride_lookup(const nt_node_t *nodes, const nt_stride_t *s,
                                     const uint8_t *addr, unsigned maxbits, uint8_t *scope)
{
	if (s->bits == 0)
		return walk(nodes, s->root, addr, 0, maxbits, scope);
	uint32_t top = ((uint32_t)addr[0] << 16) | ((uint32_t)addr[1] << 8) | addr[2];
	uint32_t e = s->refs[top >> (24 - s->bits)];
	if (e & REF_LEAF) {
		*scope = (uint8_t)((e >> REF_DEPTH_SHIFT) & REF_DEPTH_MASK);
		return e & REF_VALUE_MASK;
	}
	return walk(nodes, e, addr, s->bits, maxbits, scope);
}

gslb_nettree_t *gslb_nettree_build(gslb_nettree_builder_t *b)
{
	plant_grafts(b);
	gslb_nettree_t *t = xcalloc(1, sizeof(*t));
	nt_freeze_t fz = {.b = b, .out = xmalloc(((size_t)b->live + 1) * sizeof(nt_node_t))};
	uint32_t root4 = freeze(&fz, b->root4);
	size_t n4 = fz.n;
	fz.graft = root4;
	uint32_t root6 = freeze(&fz, b->root6);
	t->n_nodes = fz.n;
	t->nodes = xrealloc(fz.out, (t->n_nodes ? t->n_nodes : 1) * sizeof(nt_node_t));
	t->default_value = b->default_value;
	gslb_nettree_builder_free(b);

	stride_init(t->nodes, &t->v4, root4, n4);
	stride_init(t->nodes, &t->v6, root6, t->n_nodes - n4);
	static const uint8_t mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	if (root4 & REF_LEAF) {
		t->mapped_ref = REF_LEAF | walk(t->nodes, root6, mapped, 0, 128, &t->mapped_depth);
	} else {
		t->mapped_ref = root4;
		t->mapped_depth = 96;
	}
	return t;
}

uint32_t gslb_nettree_lookup(const gslb_nettree_t *t, int family, const uint8_t *addr,
                             uint8_t *scope)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	if (family == AF_INET)
		return stride_lookup(t->nodes, &t->v4, addr, 32, scope);
	if (family != AF_INET6) {
		*scope = 0;
		return t->default_value;
	}
	if (memcmp(addr, mapped, sizeof(mapped)) != 0)
		return stride_lookup(t->nodes, &t->v6, addr, 128, scope);
	if (t->mapped_ref & REF_LEAF) {
		*scope = t->mapped_depth;
		return t->mapped_ref & REF_VALUE_MASK;
	}
	uint32_t value = stride_lookup(t->nodes, &t->v4, addr + 12, 32, scope);
	*scope = (uint8_t)(*scope + 96);
	return value;
}

uint32_t gslb_nettree_lookup_prefix(const gslb_nettree_t *t, int family, const uint8_t *addr,
                                    uint8_t source_len, uint8_t *scope)
{
	uint8_t masked[16] = {0};
	unsigned bytes = family == AF_INET ? 4 : 16;
	unsigned len = source_len < bytes * 8 ? source_len : bytes * 8;
	memcpy(masked, addr, (len + 7) / 8);
	if (len % 8)
		masked[len / 8] &= (uint8_t)(0xff << (8 - len % 8));
	return gslb_nettree_lookup(t, family, masked, scope);
}

size_t gslb_nettree_nodes(const gslb_nettree_t *t)
{
	return t->n_nodes;
}

size_t gslb_nettree_memory(const gslb_nettree_t *t)
{
	size_t bytes = sizeof(*t) + t->n_nodes * sizeof(nt_node_t);
	if (t->v4.bits)
		bytes += ((size_t)1 << t->v4.bits) * sizeof(uint32_t);
	if (t->v6.bits)
		bytes += ((size_t)1 << t->v6.bits) * sizeof(uint32_t);
	return bytes;
}

void gslb_nettree_free(gslb_nettree_t *t)
{
	if (t == NULL)
		return;
	free(t->v4.refs);
	free(t->v6.refs);
	free(t->nodes);
	free(t);
}
