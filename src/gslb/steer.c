/*
 * Load steering state (see steer.h): aggregation of the health table's load values per
 * service datacenter and family, and the hysteresis of the load policies. Control thread.
 */
#include "gslb/steer.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/alloc.h"

/* Per service and family, in one block: its order, then its datacenters' loads. */
typedef struct {
	gslb_steer_order_t order;
	gslb_steer_dc_t *dcs; /* into gslb_steer.dcs */
} steer_entry_t;

struct gslb_steer {
	steer_entry_t *entries; /* 2 per service: IPv4, IPv6 */
	size_t n_svcs;
	gslb_steer_dc_t *dcs; /* every entry's datacenters, back to back */
};

static unsigned fam_index(int family)
{
	return family == AF_INET6 ? 1 : 0;
}

bool gslb_steer_value(gslb_policy_kind_t kind, const gslb_steer_dc_t *l, float *out)
{
	const unsigned conn = 1u << GSLB_LOAD_CONNECTIONS, cap = 1u << GSLB_LOAD_CAPACITY;
	switch (kind) {
	case GSLB_POLICY_LEAST_CONNECTIONS:
		*out = l->v[GSLB_LOAD_CONNECTIONS];
		return l->have & conn;
	case GSLB_POLICY_CAPACITY:
		*out = l->v[GSLB_LOAD_CONNECTIONS] - l->v[GSLB_LOAD_CAPACITY];
		return (l->have & (conn | cap)) == (conn | cap);
	case GSLB_POLICY_PACKET_RATE:
		*out = l->v[GSLB_LOAD_PACKET_RATE];
		return l->have & (1u << GSLB_LOAD_PACKET_RATE);
	case GSLB_POLICY_KBPS:
		*out = l->v[GSLB_LOAD_KBPS];
		return l->have & (1u << GSLB_LOAD_KBPS);
	case GSLB_POLICY_FAILOVER:
	case GSLB_POLICY_GEO:
	case GSLB_POLICY_ROUND_ROBIN:
	case GSLB_POLICY_WEIGHTED:
	case GSLB_POLICY_PERSIST:
	case GSLB_POLICY_MULTI:
	case GSLB_POLICY_ALL:
	case GSLB_POLICY_RTT:
	case GSLB_POLICY_COMPLETION_RATE:
	case GSLB_POLICY_HOPS:
	case GSLB_POLICY_QOS:
		break;
	}
	return false;
}

#define NO_ROUND UINT64_MAX

/*
 * The load of @p dc for @p family: the reported values of its UP addresses plus, for the UP
 * addresses without one, their weight's share of the reported ones. Returns the lowest round
 * of the targets that report (NO_ROUND when none does): the rounds all of them completed.
 */
static uint64_t aggregate(const gslb_policy_dc_t *dc, int family, const gslb_health_t *h,
                          gslb_steer_dc_t *out)
{
	uint64_t fam = family == AF_INET ? dc->mask4 : dc->mask6;
	double sum[GSLB_LOAD_KINDS] = {0}, known_w[GSLB_LOAD_KINDS] = {0};
	double total_w = 0;
	uint64_t round = NO_ROUND;
	memset(out, 0, sizeof(*out));
	for (uint64_t m = fam; m; m &= m - 1) {
		const gslb_policy_addr_t *a = &dc->addrs[__builtin_ctzll(m)];
		if (h && gslb_sttl_down(gslb_health_sttl(h, a->target)))
			continue;
		out->up++;
		total_w += a->weight;
		const gslb_load_t *l = h ? gslb_health_load(h, a->target) : NULL;
		if (!l) {
			out->estimated++;
			continue;
		}
		if (l->round < round)
			round = l->round;
		if (l->age_ms > out->age_ms)
			out->age_ms = l->age_ms;
		for (unsigned k = 0; k < GSLB_LOAD_KINDS; k++) {
			if (!(l->have & (1u << k)))
				continue;
			sum[k] += l->v[k];
			known_w[k] += a->weight;
		}
	}
	for (unsigned k = 0; k < GSLB_LOAD_KINDS; k++) {
		if (known_w[k] <= 0)
			continue;
		out->v[k] = (float)(sum[k] * total_w / known_w[k]);
		out->have |= (uint8_t)(1u << k);
	}
	return round;
}

/* True when value @p c (lower is better) beats @p s by @p margin percent: s - c is at least
 * that share of |s| (and positive). Capacity values are negated spares and may be negative. */
static bool beats(float c, float s, unsigned margin)
{
	float diff = s - c;
	float ref = s < 0 ? -s : s;
	return diff > 0 && diff * 100.0f >= ref * (float)margin;
}

/* Order datacenters @p dcs with data by value (insertion sort; a service has few), the sticky
 * best first; fill the hysteresis fields from @p prev. */
static void order_entry(const gslb_policy_svc_t *svc, steer_entry_t *e,
                        const gslb_steer_order_t *prev, uint64_t round,
                        const gslb_steer_opts_t *opts)
{
	gslb_steer_order_t *o = &e->order;
	float val[GSLB_POLICY_DC_MAX];
	uint8_t idx[GSLB_POLICY_DC_MAX];
	unsigned n = 0;
	for (unsigned d = 0; d < svc->dc_count; d++) {
		float v;
		if (e->dcs[d].up == 0 || !gslb_steer_value(svc->policy, &e->dcs[d], &v))
			continue;
		unsigned j = n++;
		for (; j > 0 && val[j - 1] > v; j--) {
			val[j] = val[j - 1];
			idx[j] = idx[j - 1];
		}
		val[j] = v;
		idx[j] = (uint8_t)d;
	}
	*o = (gslb_steer_order_t){.n = (uint8_t)n,
	                          .sticky = GSLB_POLICY_DC_NONE,
	                          .challenger = GSLB_POLICY_DC_NONE,
	                          .round = round};
	if (n == 0) {
		/* No values this round (stale, a reload's first table): keep the state, so the
		 * answers do not jump when they come back. */
		if (prev) {
			o->sticky = prev->sticky;
			o->challenger = prev->challenger;
			o->streak = prev->streak;
			o->round = prev->round;
		}
		return;
	}
	int sticky_pos = -1;
	for (unsigned i = 0; prev && i < n; i++)
		if (idx[i] == prev->sticky)
			sticky_pos = (int)i;
	if (sticky_pos < 0) {
		o->sticky = idx[0]; /* no (usable) sticky best: the best now is one */
	} else if (sticky_pos == 0 || !beats(val[0], val[sticky_pos], opts->margin_pct)) {
		o->sticky = prev->sticky;
	} else if (round == prev->round && prev->challenger == idx[0]) {
		/* not a new round: the count stands */
		o->sticky = prev->sticky;
		o->challenger = prev->challenger;
		o->streak = prev->streak;
	} else {
		/* Health is republished when a value changes, so rounds between two builds saw the
		 * values this one sees: each of them counts for the challenger. */
		/* A round counter that went back (a monitor restarted, a target joined) or an
		 * unknown one (a reload) counts this build as one round. */
		uint64_t rounds =
		    prev->round != NO_ROUND && round > prev->round ? round - prev->round : 1;
		uint64_t streak = prev->challenger == idx[0] ? prev->streak + rounds : 1;
		o->streak = (uint8_t)(streak < 255 ? streak : 255);
		o->challenger = idx[0];
		o->sticky = prev->sticky;
		if (o->streak >= opts->rounds) {
			o->sticky = idx[0];
			o->challenger = GSLB_POLICY_DC_NONE;
			o->streak = 0;
		}
	}
	o->order[0] = o->sticky;
	for (unsigned i = 0, k = 1; i < n; i++)
		if (idx[i] != o->sticky)
			o->order[k++] = idx[i];
}

static bool uses_load(gslb_policy_kind_t k)
{
	return gslb_policy_kind_measured(k) &&
	       (!gslb_policy_kind_by_path(k) || k == GSLB_POLICY_QOS);
}

gslb_steer_t *gslb_steer_build(const gslb_steer_t *prev, const gslb_policy_svc_t *const *svcs,
                               size_t n_svcs, const gslb_health_t *health,
                               const gslb_steer_opts_t *opts)
{
	gslb_steer_t *st = xcalloc(1, sizeof(*st));
	st->n_svcs = n_svcs;
	st->entries = xcalloc(n_svcs * 2 + 1, sizeof(*st->entries));
	size_t n_dcs = 0;
	for (size_t i = 0; i < n_svcs; i++)
		n_dcs += svcs[i]->dc_count;
	st->dcs = xcalloc(n_dcs * 2 + 1, sizeof(*st->dcs));
	if (prev && prev->n_svcs != n_svcs)
		prev = NULL;
	gslb_steer_dc_t *next = st->dcs;
	for (size_t i = 0; i < n_svcs; i++) {
		const gslb_policy_svc_t *svc = svcs[i];
		for (unsigned f = 0; f < 2; f++) {
			steer_entry_t *e = &st->entries[i * 2 + f];
			e->dcs = next;
			next += svc->dc_count;
			e->order = (gslb_steer_order_t){.sticky = GSLB_POLICY_DC_NONE,
			                                .challenger = GSLB_POLICY_DC_NONE};
			if (!uses_load(svc->policy))
				continue;
			int family = f ? AF_INET6 : AF_INET;
			uint64_t round = NO_ROUND;
			for (unsigned d = 0; d < svc->dc_count; d++) {
				uint64_t r = aggregate(&svc->dcs[d], family, health, &e->dcs[d]);
				round = r < round ? r : round;
			}
			if (svc->policy != GSLB_POLICY_QOS)
				order_entry(svc, e, prev ? &prev->entries[i * 2 + f].order : NULL,
				            round, opts);
		}
	}
	return st;
}

/* Datacenter @p dc of @p from as an index of @p to (by name), GSLB_POLICY_DC_NONE if gone. */
static uint8_t dc_renumber(const gslb_policy_svc_t *from, const gslb_policy_svc_t *to, uint8_t dc)
{
	if (dc >= from->dc_count)
		return GSLB_POLICY_DC_NONE;
	for (unsigned i = 0; i < to->dc_count; i++)
		if (strcmp(to->dcs[i].name, from->dcs[dc].name) == 0)
			return (uint8_t)i;
	return GSLB_POLICY_DC_NONE;
}

gslb_steer_t *gslb_steer_remap(const gslb_steer_t *prev, const gslb_policy_svc_t *const *svcs,
                               size_t n_svcs, const gslb_policy_svc_t *const *old_svcs,
                               const size_t *from)
{
	gslb_steer_t *st = gslb_steer_build(NULL, svcs, n_svcs, NULL, &(gslb_steer_opts_t){0});
	for (size_t i = 0; i < n_svcs; i++) {
		if (from[i] >= prev->n_svcs)
			continue;
		const gslb_policy_svc_t *old = old_svcs[from[i]];
		for (unsigned f = 0; f < 2; f++) {
			const gslb_steer_order_t *po = &prev->entries[from[i] * 2 + f].order;
			gslb_steer_order_t *o = &st->entries[i * 2 + f].order;
			/* Only who is sticky: the new monitors count rounds afresh. */
			o->sticky = dc_renumber(old, svcs[i], po->sticky);
			o->round = NO_ROUND;
		}
	}
	return st;
}

bool gslb_steer_pending(const gslb_steer_t *st)
{
	for (size_t i = 0; i < st->n_svcs * 2; i++)
		if (st->entries[i].order.challenger != GSLB_POLICY_DC_NONE)
			return true;
	return false;
}

void gslb_steer_free(gslb_steer_t *st)
{
	if (!st)
		return;
	free(st->entries);
	free(st->dcs);
	free(st);
}

const gslb_steer_order_t *gslb_steer_order(const gslb_steer_t *st, size_t svc, int family)
{
	return &st->entries[svc * 2 + fam_index(family)].order;
}

const gslb_steer_dc_t *gslb_steer_dc(const gslb_steer_t *st, size_t svc, int family, unsigned dc)
{
	return &st->entries[svc * 2 + fam_index(family)].dcs[dc];
}
