/*
 * The measured policies' part of a GSLB decision (see view.h, policy.h): the order of a
 * service's datacenters from the client prefix's row in the path table (rtt, completion-rate,
 * hops, qos) or from the load orders the control thread computed (gslb/steer.h). The policy
 * then fails over along that order. Query threads: no allocation, no lock, no sorting of more
 * than the service's datacenters.
 */
#include <string.h>

#include "gslb/view_int.h"

/* Insert @p key into the ascending @p keys[0..n). */
static void insert_key(uint32_t *keys, unsigned n, uint32_t key)
{
	unsigned j = n;
	for (; j > 0 && keys[j - 1] > key; j--)
		keys[j] = keys[j - 1];
	keys[j] = key;
}

/* One comparator of a sorting network on locals, so the whole network stays in registers. */
#define CMP_SWAP(a, b)                                                                             \
	do {                                                                                       \
		uint32_t lo_ = a < b ? a : b, hi_ = a < b ? b : a;                                 \
		a = lo_;                                                                           \
		b = hi_;                                                                           \
	} while (0)

/*
 * Sort @p keys[0..n) ascending. Measured values are noise to the branch predictor, so an
 * insertion sort mispredicts about once per key; up to 8 keys (most services) go through
 * Batcher's 19-comparator network instead, which compiles to conditional moves.
 */
static void sort_keys(uint32_t *keys, unsigned n)
{
	if (n > 8) {
		for (unsigned i = 1; i < n; i++)
			insert_key(keys, i, keys[i]);
		return;
	}
	for (unsigned i = n; i < 8; i++)
		keys[i] = UINT32_MAX;
	uint32_t k0 = keys[0], k1 = keys[1], k2 = keys[2], k3 = keys[3], k4 = keys[4], k5 = keys[5],
	         k6 = keys[6], k7 = keys[7];
	CMP_SWAP(k0, k1);
	CMP_SWAP(k2, k3);
	CMP_SWAP(k4, k5);
	CMP_SWAP(k6, k7);
	CMP_SWAP(k0, k2);
	CMP_SWAP(k1, k3);
	CMP_SWAP(k4, k6);
	CMP_SWAP(k5, k7);
	CMP_SWAP(k1, k2);
	CMP_SWAP(k5, k6);
	CMP_SWAP(k0, k4);
	CMP_SWAP(k1, k5);
	CMP_SWAP(k2, k6);
	CMP_SWAP(k3, k7);
	CMP_SWAP(k2, k4);
	CMP_SWAP(k3, k5);
	CMP_SWAP(k1, k2);
	CMP_SWAP(k3, k4);
	CMP_SWAP(k5, k6);
	keys[0] = k0;
	keys[1] = k1;
	keys[2] = k2;
	keys[3] = k3;
	keys[4] = k4;
	keys[5] = k5;
	keys[6] = k6;
	keys[7] = k7;
}

/*
 * rtt, completion-rate, hops: one integer key per datacenter with a cell, the service
 * position in the low byte so ties keep the configured order. rtt puts the row's sticky best
 * (the path table's hysteresis) first when it is one of the service's datacenters.
 */
static unsigned order_by_cells(const gslb_view_t *v, const view_svc_t *s, decide_t *d)
{
	const gslb_paths_t *p = v->paths;
	const uint8_t *cols = v->path_cols + s->first_dc;
	gslb_policy_kind_t kind = s->p.policy;
	unsigned sticky =
	    kind == GSLB_POLICY_RTT ? gslb_paths_row_best(p, d->row) : GSLB_PATHS_NO_COLUMN;
	uint32_t keys[GSLB_POLICY_DC_MAX];
	unsigned n = 0;
	for (unsigned i = 0; i < s->p.dc_count; i++) {
		if (cols[i] == GSLB_PATHS_NO_COLUMN)
			continue;
		gslb_path_cell_t c = gslb_paths_cell(p, d->row, cols[i]);
		if (c.empty)
			continue;
		uint32_t k;
		if (kind == GSLB_POLICY_RTT)
			k = cols[i] == sticky ? 0 : (uint32_t)c.rtt + 1;
		else if (kind == GSLB_POLICY_COMPLETION_RATE)
			k = c.loss;
		else
			k = c.hops ? c.hops : 0x100; /* unknown hops last */
		keys[n++] = k << 8 | i;
	}
	sort_keys(keys, n);
	for (unsigned j = 0; j < n; j++)
		d->measured[j] = (uint8_t)(keys[j] & 0xff);
	return n;
}

/* The qos terms, as values where higher is better or lower is better. */
typedef struct {
	float v[CONF_QOS_TERMS];
	uint8_t have; /* bit per CONF_QOS_* */
} qos_vals_t;

static bool qos_lower_is_better(unsigned term)
{
	return term == CONF_QOS_RTT || term == CONF_QOS_HOPS || term == CONF_QOS_PACKET_RATE ||
	       term == CONF_QOS_KBPS;
}

static void qos_values(const gslb_view_t *v, const view_svc_t *s, int family, unsigned i,
                       const gslb_path_cell_t *c, qos_vals_t *q)
{
	q->have = 0;
	if (c->rtt != GSLB_PATHFMT_RTT_NONE) {
		q->v[CONF_QOS_RTT] = c->rtt ? c->rtt : 1; /* 0.1 ms: below resolution, not zero */
		q->have |= 1u << CONF_QOS_RTT;
	}
	q->v[CONF_QOS_COMPLETION_RATE] = (float)(100 - c->loss);
	q->have |= 1u << CONF_QOS_COMPLETION_RATE;
	if (c->hops) {
		q->v[CONF_QOS_HOPS] = c->hops;
		q->have |= 1u << CONF_QOS_HOPS;
	}
	if (!v->steer)
		return;
	const gslb_steer_dc_t *l = gslb_steer_dc(v->steer, (size_t)(s - v->svcs), family, i);
	static const struct {
		unsigned term, load;
	} direct[] = {{CONF_QOS_PACKET_RATE, GSLB_LOAD_PACKET_RATE},
	              {CONF_QOS_KBPS, GSLB_LOAD_KBPS},
	              {CONF_QOS_LINK_CAPACITY, GSLB_LOAD_LINK_CAPACITY}};
	for (size_t k = 0; k < STEER_ARRAY_LEN(direct); k++) {
		if (l->have & (1u << direct[k].load)) {
			q->v[direct[k].term] = l->v[direct[k].load];
			q->have |= 1u << direct[k].term;
		}
	}
	float used; /* connections - capacity: the capacity policy's lower-is-better value */
	if (gslb_steer_value(GSLB_POLICY_CAPACITY, l, &used)) {
		q->v[CONF_QOS_VS_CAPACITY] = used < 0 ? -used : 0; /* spare, never negative */
		q->have |= 1u << CONF_QOS_VS_CAPACITY;
	}
}

/* Term @p t of @p x normalised to 0..1 against the best @p best among the candidates. */
static float qos_norm(unsigned t, float x, float best)
{
	if (qos_lower_is_better(t))
		return x <= best ? 1.0f : (best > 0 ? best / x : 0.0f);
	return best > 0 ? x / best : 0.0f;
}

/*
 * qos: per candidate the sum of coefficient x normalised term (1 = the best candidate's
 * value). Hysteresis: the row's sticky RTT best scores the margin on top (x (1 + margin %)),
 * so a challenger must beat it by that much overall; the sticky best itself only moves when
 * the path table's RTT hysteresis lets it, so jitter in any one term cannot flip the answer.
 */
static unsigned order_by_qos(const gslb_view_t *v, const view_svc_t *s, int family, decide_t *d)
{
	const gslb_paths_t *p = v->paths;
	const uint8_t *cols = v->path_cols + s->first_dc;
	unsigned sticky = gslb_paths_row_best(p, d->row);
	qos_vals_t vals[GSLB_POLICY_DC_MAX];
	uint8_t cand[GSLB_POLICY_DC_MAX];
	float best[CONF_QOS_TERMS] = {0};
	uint8_t any = 0;
	unsigned n = 0;
	for (unsigned i = 0; i < s->p.dc_count; i++) {
		if (cols[i] == GSLB_PATHS_NO_COLUMN)
			continue;
		gslb_path_cell_t c = gslb_paths_cell(p, d->row, cols[i]);
		if (c.empty)
			continue;
		qos_values(v, s, family, i, &c, &vals[n]);
		for (unsigned t = 0; t < CONF_QOS_TERMS; t++) {
			if (!(vals[n].have & (1u << t)))
				continue;
			float x = vals[n].v[t];
			if (!(any & (1u << t)) ||
			    (qos_lower_is_better(t) ? x < best[t] : x > best[t]))
				best[t] = x;
			any |= (uint8_t)(1u << t);
		}
		cand[n++] = (uint8_t)i;
	}
	float score[GSLB_POLICY_DC_MAX];
	for (unsigned j = 0; j < n; j++) {
		float sc = 0;
		for (unsigned t = 0; t < CONF_QOS_TERMS; t++)
			if (vals[j].have & (1u << t))
				sc += (float)s->qos[t] * qos_norm(t, vals[j].v[t], best[t]);
		if (cols[cand[j]] == sticky)
			sc *= 1.0f + (float)v->paths_margin_pct / 100.0f;
		d->score[cand[j]] = sc;
		/* highest first, ties in configured order */
		unsigned k = j;
		for (; k > 0 && score[k - 1] < sc; k--) {
			score[k] = score[k - 1];
			d->measured[k] = d->measured[k - 1];
		}
		score[k] = sc;
		d->measured[k] = cand[j];
	}
	return n;
}

/* By paths: the row of the client prefix, or why there is none. Returns the order's length. */
static unsigned order_by_path(const gslb_view_t *v, const view_svc_t *s, int family, decide_t *d)
{
	if (!v->paths) {
		d->paths = PATHS_NO_TABLE;
		return 0;
	}
	if (d->len < d->plen) {
		d->paths = PATHS_TOO_SHORT;
		return 0;
	}
	unsigned n = 0;
	if (gslb_paths_lookup(v->paths, d->family, d->addr, &d->row))
		n = s->p.policy == GSLB_POLICY_QOS ? order_by_qos(v, s, family, d)
		                                   : order_by_cells(v, s, d);
	d->paths = n ? PATHS_ROW : PATHS_NO_ROW;
	return n;
}

uint8_t view_measured_order(const gslb_view_t *v, const view_svc_t *s, sa_family_t family,
                            decide_t *d, uint8_t scope)
{
	gslb_policy_kind_t kind = s->p.policy;
	unsigned n = 0;
	if (!gslb_policy_kind_by_path(kind)) {
		if (v->steer) {
			const gslb_steer_order_t *o =
			    gslb_steer_order(v->steer, (size_t)(s - v->svcs), family);
			d->q.measured = o->order;
			d->q.measured_len = o->n;
		}
		return scope;
	}
	if (d->family != AF_INET && d->family != AF_INET6) {
		d->paths = PATHS_NO_ROW; /* no address to measure (a UNIX socket client) */
		return scope;
	}
	if (v->paths)
		d->plen = (uint8_t)gslb_paths_prefix_len(v->paths, d->family);
	else
		d->plen = (uint8_t)(d->family == AF_INET ? v->paths_plen4 : v->paths_plen6);
	n = order_by_path(v, s, family, d);
	d->q.measured = d->measured;
	d->q.measured_len = (uint8_t)n;
	if (d->paths == PATHS_TOO_SHORT)
		return scope; /* the fallback decided on the client's coarser prefix alone */
	/* The answer holds for the row (and, when the map ordered the rest, for its block): a
	 * fallback answer too, since the prefix gets a row of its own once it is measured. */
	return d->plen > scope ? d->plen : scope;
}
