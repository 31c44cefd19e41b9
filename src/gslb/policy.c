/*
 * Selection policies (see policy.h for the model). The select path runs on query threads and
 * touches only its arguments: candidate sets are 64-bit masks (at most 64 datacenters and 64
 * addresses each), weights and persist identities are copied to small stack arrays, nothing
 * is allocated. prepare() and explain() run on the control thread.
 */
#include "gslb/policy.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/err.h"
#include "dns/dname.h"

/* ---- hashing and randomness ---- */

/* splitmix64's finalizer (Stafford variant 13): a bijection with full avalanche. */
static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* Hash of a byte string; fixed constants so every node and version agrees. */
static uint64_t hash_bytes(const uint8_t *p, size_t n, uint64_t seed)
{
	uint64_t h = mix64(seed ^ n);
	while (n >= 8) {
		uint64_t w = 0;
		for (int i = 0; i < 8; i++)
			w = w << 8 | p[i];
		h = mix64(h ^ w);
		p += 8;
		n -= 8;
	}
	uint64_t w = 0;
	for (size_t i = 0; i < n; i++)
		w = w << 8 | p[i];
	return mix64(h ^ w ^ (uint64_t)n << 56);
}

static uint64_t rng_next(gslb_policy_rng_t *rng)
{
	rng->s += UINT64_C(0x9e3779b97f4a7c15);
	return mix64(rng->s);
}

/* Uniform in [0, range), range >= 1, without modulo bias (Lemire's multiply-and-reject). */
static uint32_t rng_below(gslb_policy_rng_t *rng, uint32_t range)
{
	uint64_t m = (rng_next(rng) >> 32) * (uint64_t)range;
	uint32_t low = (uint32_t)m;
	if (low < range) {
		uint32_t threshold = (uint32_t)-range % range;
		while (low < threshold) {
			m = (rng_next(rng) >> 32) * (uint64_t)range;
			low = (uint32_t)m;
		}
	}
	return (uint32_t)(m >> 32);
}

void gslb_policy_rng_init(gslb_policy_rng_t *rng, uint64_t seed)
{
	rng->s = seed;
	/* Random starting points: threads that all started at 0 would send the first answer of
	 * every thread to the same address after each restart. */
	for (size_t i = 0; i < GSLB_POLICY_RR_SLOTS; i++)
		rng->rr[i] = (uint32_t)rng_next(rng);
}

uint64_t gslb_policy_client_key(sa_family_t family, const uint8_t *addr, unsigned prefix_len)
{
	unsigned max = family == AF_INET ? 32 : 128;
	if (prefix_len > max)
		prefix_len = max;
	uint8_t masked[17] = {(uint8_t)(family == AF_INET ? 4 : 6)};
	size_t full = prefix_len / 8;
	memcpy(masked + 1, addr, full);
	if (prefix_len % 8)
		masked[1 + full] = addr[full] & (uint8_t)(0xff00 >> (prefix_len % 8));
	/* The length is hashed too: 10.0.0.0/8 and 10.0.0.0/16 are different subnets. */
	return hash_bytes(masked, 1 + (max / 8), UINT64_C(0x5ee7c11e47) ^ prefix_len);
}

/* ---- rendezvous hashing ---- */

#define NEGLOG_FRAC_BITS 24

/* log2(1 + i/256) in units of 2^-24, i = 0..256, rounded; generated once with
 * round(log2(1 + i / 256) * 2**24). A fixed table, not libm, so that every node computes the
 * same persist choices whatever its platform. */
static const uint32_t log2_table[257] = {
    0,        94364,    188362,   281996,   375270,   468185,   560745,   652952,   744810,
    836320,   927485,   1018309,  1108793,  1198939,  1288752,  1378232,  1467383,  1556207,
    1644705,  1732882,  1820738,  1908277,  1995500,  2082410,  2169009,  2255299,  2341283,
    2426963,  2512340,  2597417,  2682196,  2766679,  2850868,  2934766,  3018374,  3101694,
    3184728,  3267478,  3349946,  3432134,  3514044,  3595678,  3677038,  3758124,  3838941,
    3919488,  3999768,  4079782,  4159533,  4239023,  4318251,  4397222,  4475935,  4554394,
    4632599,  4710552,  4788255,  4865709,  4942916,  5019878,  5096595,  5173071,  5249305,
    5325300,  5401057,  5476578,  5551864,  5626916,  5701737,  5776327,  5850688,  5924821,
    5998727,  6072409,  6145867,  6219103,  6292118,  6364913,  6437490,  6509850,  6581994,
    6653924,  6725641,  6797146,  6868440,  6939525,  7010402,  7081072,  7151536,  7221795,
    7291852,  7361706,  7431359,  7500812,  7570066,  7639123,  7707984,  7776649,  7845119,
    7913397,  7981483,  8049377,  8117082,  8184598,  8251926,  8319067,  8386022,  8452793,
    8519380,  8585785,  8652008,  8718050,  8783912,  8849596,  8915102,  8980431,  9045584,
    9110562,  9175366,  9239998,  9304457,  9368745,  9432863,  9496811,  9560591,  9624203,
    9687648,  9750928,  9814042,  9876993,  9939780,  10002404, 10064867, 10127170, 10189312,
    10251295, 10313120, 10374787, 10436298, 10497652, 10558852, 10619897, 10680789, 10741528,
    10802114, 10862550, 10922835, 10982970, 11042956, 11102794, 11162484, 11222028, 11281425,
    11340677, 11399784, 11458748, 11517568, 11576245, 11634780, 11693175, 11751428, 11809542,
    11867517, 11925353, 11983051, 12040612, 12098037, 12155325, 12212479, 12269497, 12326382,
    12383133, 12439752, 12496238, 12552593, 12608817, 12664911, 12720875, 12776710, 12832416,
    12887994, 12943445, 12998770, 13053968, 13109041, 13163988, 13218811, 13273511, 13328087,
    13382540, 13436871, 13491080, 13545168, 13599135, 13652983, 13706711, 13760320, 13813810,
    13867183, 13920438, 13973576, 14026597, 14079503, 14132294, 14184969, 14237530, 14289978,
    14342312, 14394532, 14446641, 14498638, 14550523, 14602297, 14653961, 14705514, 14756958,
    14808293, 14859519, 14910637, 14961648, 15012551, 15063347, 15114037, 15164621, 15215099,
    15265473, 15315742, 15365906, 15415967, 15465925, 15515779, 15565531, 15615181, 15664730,
    15714177, 15763523, 15812769, 15861915, 15910962, 15959909, 16008758, 16057508, 16106160,
    16154714, 16203172, 16251532, 16299796, 16347964, 16396036, 16444013, 16491896, 16539683,
    16587377, 16634976, 16682482, 16729896, 16777216,
};

/*
 * -log2(h / 2^64) in units of 2^-24: the integer part from the highest set bit, the fraction
 * from the table with linear interpolation (error below 3e-6, far under what would bias a
 * choice). h = 0 counts as 1. Result in (0, 64 * 2^24].
 */
static uint32_t neglog2_fix(uint64_t h)
{
	if (!h)
		h = 1;
	int ip = 63 - __builtin_clzll(h);
	/* the 31 bits below the leading one: 8 index the table, 23 interpolate */
	uint32_t m = (uint32_t)(ip >= 31 ? h >> (ip - 31) : h << (31 - ip)) & 0x7fffffffu;
	uint32_t i = m >> 23, rem = m & 0x7fffffu;
	uint32_t lo = log2_table[i], hi = log2_table[i + 1];
	uint32_t frac = lo + (uint32_t)(((uint64_t)(hi - lo) * rem) >> 23);
	return ((uint32_t)(64 - ip) << NEGLOG_FRAC_BITS) - frac;
}

/*
 * Weighted rendezvous hashing: each candidate i scores -ln(u_i) / w_i with u_i a uniform hash
 * of (client, candidate); the lowest wins. -ln(u)/w is exponential with rate w, so candidate i
 * wins with probability w_i / sum(w), and removing a candidate only moves the clients it was
 * winning. Ties go to the lower position. Returns a position in @p mask (non-empty).
 */
static unsigned hrw_pick(uint64_t mask, const uint32_t *w, const uint64_t *ids, uint64_t key)
{
	unsigned best = 64;
	uint64_t best_l = 0, best_w = 1;
	for (uint64_t m = mask; m; m &= m - 1) {
		unsigned i = (unsigned)__builtin_ctzll(m);
		uint64_t l = neglog2_fix(mix64(key ^ ids[i]));
		/* l/w < best_l/best_w, cross-multiplied: both sides < 2^31 * 2^16 */
		if (best == 64 || l * best_w < best_l * w[i]) {
			best = i;
			best_l = l;
			best_w = w[i];
		}
	}
	return best;
}

/* ---- candidate picking over masks ---- */

static unsigned nth_bit(uint64_t mask, unsigned n)
{
	while (n--)
		mask &= mask - 1;
	return (unsigned)__builtin_ctzll(mask);
}

/* One position of @p mask (non-empty), chosen with probability proportional to its weight. */
static unsigned weighted_pick(uint64_t mask, const uint32_t *w, gslb_policy_rng_t *rng)
{
	uint32_t total = 0;
	for (uint64_t m = mask; m; m &= m - 1)
		total += w[__builtin_ctzll(m)];
	uint32_t r = rng_below(rng, total);
	for (uint64_t m = mask;; m &= m - 1) {
		unsigned i = (unsigned)__builtin_ctzll(m);
		if (r < w[i] || !(m & (m - 1)))
			return i;
		r -= w[i];
	}
}

/* The next position of @p mask (non-empty) for this thread's counter @p slot. */
static unsigned rr_pick(uint64_t mask, gslb_policy_rng_t *rng, unsigned slot)
{
	uint32_t c = rng->rr[slot % GSLB_POLICY_RR_SLOTS]++;
	return nth_bit(mask, c % (unsigned)__builtin_popcountll(mask));
}

/* ---- datacenter scan ---- */

typedef struct {
	uint64_t fam; /* addresses of the query's family */
	uint64_t up;  /* of which UP */
	uint8_t forced_down;
} dc_scan_t;

static uint32_t cap_min(uint32_t a, uint32_t b)
{
	if (!a)
		return b;
	if (!b)
		return a;
	return a < b ? a : b;
}

/* Reads the health of every address of the family in @p dc; folds TTL caps into @p cap.
 * Accumulates in locals: writing through @p cap or @p s inside the loop would force a reload
 * per address, since they might alias the health array. */
static void dc_scan(const gslb_policy_dc_t *dc, const gslb_health_t *health, sa_family_t family,
                    dc_scan_t *s, uint32_t *cap)
{
	uint64_t fam = family == AF_INET ? dc->mask4 : dc->mask6;
	uint64_t down = 0;
	uint32_t c = *cap;
	unsigned forced = 0;
	s->fam = fam;
	if (health) {
		for (uint64_t m = fam; m; m &= m - 1) {
			unsigned i = (unsigned)__builtin_ctzll(m);
			gslb_sttl_t st = gslb_health_sttl(health, dc->addrs[i].target);
			c = cap_min(c, gslb_sttl_ttl(st));
			if (gslb_sttl_down(st)) {
				down |= UINT64_C(1) << i;
				forced += gslb_sttl_forced(st);
			}
		}
	}
	s->up = fam & ~down;
	s->forced_down = (uint8_t)forced;
	*cap = c;
}

static gslb_dc_status_t scan_status(const dc_scan_t *s)
{
	if (!s->fam)
		return GSLB_DC_NO_FAMILY;
	if (s->up)
		return GSLB_DC_CANDIDATE;
	if (s->forced_down == __builtin_popcountll(s->fam))
		return GSLB_DC_FORCED_DOWN;
	return GSLB_DC_DOWN;
}

static void trace_dc(gslb_policy_trace_t *t, unsigned pos, const dc_scan_t *s)
{
	if (!t)
		return;
	t->dcs[pos].status = (uint8_t)scan_status(s);
	t->dcs[pos].total = (uint8_t)__builtin_popcountll(s->fam);
	t->dcs[pos].up = (uint8_t)__builtin_popcountll(s->up);
	t->dcs[pos].forced_down = s->forced_down;
}

/* ---- the decision ---- */

/* State of one select() call. */
typedef struct {
	const gslb_policy_svc_t *svc;
	const gslb_policy_query_t *q;
	const gslb_health_t *health;
	gslb_policy_rng_t *rng;
	gslb_policy_trace_t *trace;
	gslb_policy_kind_t pol;          /* that decides: the service's, or its fallback policy */
	bool measured;                   /* pol is measured and q->measured leads the order */
	uint8_t ord[GSLB_POLICY_DC_MAX]; /* datacenters considered, best first */
	unsigned n, n_measured;
	uint32_t cap;
	dc_scan_t scan[GSLB_POLICY_DC_MAX]; /* per position in ord, valid up to scanned */
	unsigned scanned;
} sel_t;

/* Append the valid, not yet @p seen entries of @p list to the order; returns how many of
 * @p list were valid at all (seen or not). */
static unsigned add_order(sel_t *s, const uint8_t *list, unsigned len, uint64_t *seen)
{
	unsigned valid = 0;
	for (unsigned i = 0; list && i < len; i++) {
		uint8_t dc = list[i];
		if (dc >= s->svc->dc_count)
			continue;
		valid++;
		if (*seen & (UINT64_C(1) << dc))
			continue;
		*seen |= UINT64_C(1) << dc;
		s->ord[s->n++] = dc;
	}
	return valid;
}

/* The datacenters to consider: for a measured policy with a measurement, the measured ones
 * first; then the client's map order for geo (invalid and repeated entries dropped), else, or
 * when the map leaves nothing, the configured order. */
static void build_order(sel_t *s)
{
	const gslb_policy_svc_t *svc = s->svc;
	const gslb_policy_query_t *q = s->q;
	uint64_t seen = 0;
	s->n = 0;
	if (s->measured)
		add_order(s, q->measured, q->measured_len, &seen);
	s->n_measured = s->n;
	bool geo =
	    s->pol == GSLB_POLICY_GEO || (s->measured && svc->fallback_policy == GSLB_POLICY_GEO);
	unsigned from_map = geo ? add_order(s, q->order, q->order_len, &seen) : 0;
	if (from_map == 0) {
		for (unsigned i = 0; i < svc->dc_count; i++) {
			if (!(seen & (UINT64_C(1) << i)))
				s->ord[s->n++] = (uint8_t)i;
		}
	}
	if (s->trace) {
		s->trace->policy = s->measured ? svc->policy : s->pol;
		s->trace->n_measured = (uint8_t)s->n_measured;
		s->trace->n = (uint8_t)s->n;
		for (unsigned i = 0; i < s->n; i++)
			s->trace->dcs[i] = (gslb_policy_trace_dc_t){.dc = s->ord[i]};
	}
}

static void scan_upto(sel_t *s, unsigned pos)
{
	for (; s->scanned <= pos; s->scanned++) {
		unsigned p = s->scanned;
		dc_scan(&s->svc->dcs[s->ord[p]], s->health, s->q->family, &s->scan[p], &s->cap);
		trace_dc(s->trace, p, &s->scan[p]);
	}
}

/* Position in ord of the datacenter to answer from, or -1 when none is available. */
static int pick_dc(sel_t *s)
{
	const gslb_policy_svc_t *svc = s->svc;
	uint64_t avail = 0;
	for (unsigned p = 0; p < s->n; p++) {
		scan_upto(s, p);
		if (s->scan[p].up) {
			avail |= UINT64_C(1) << p;
			/* Failover stops at the first available: later ones were not read, so their
			 * health does not cap the TTL. */
			if (s->pol == GSLB_POLICY_FAILOVER || s->pol == GSLB_POLICY_GEO ||
			    s->measured)
				return (int)p;
		}
	}
	if (!avail)
		return -1;
	uint32_t w[GSLB_POLICY_DC_MAX];
	uint64_t ids[GSLB_POLICY_DC_MAX];
	for (unsigned p = 0; p < s->n; p++) {
		w[p] = svc->dcs[s->ord[p]].weight;
		ids[p] = svc->dcs[s->ord[p]].hrw_id;
	}
	switch (s->pol) {
	case GSLB_POLICY_WEIGHTED:
		return (int)weighted_pick(avail, w, s->rng);
	case GSLB_POLICY_PERSIST:
		return (int)hrw_pick(avail, w, ids, s->q->client_key);
	case GSLB_POLICY_ROUND_ROBIN:
		return (int)rr_pick(avail, s->rng, svc->rr_slot);
	case GSLB_POLICY_FAILOVER:
	case GSLB_POLICY_GEO:
	case GSLB_POLICY_MULTI:
	case GSLB_POLICY_ALL:
	case GSLB_POLICY_RTT:
	case GSLB_POLICY_COMPLETION_RATE:
	case GSLB_POLICY_HOPS:
	case GSLB_POLICY_QOS:
	case GSLB_POLICY_LEAST_CONNECTIONS:
	case GSLB_POLICY_CAPACITY:
	case GSLB_POLICY_PACKET_RATE:
	case GSLB_POLICY_KBPS:
		break;
	}
	/* prepare() rejects other kinds at this level; answer the first rather than crash. */
	return (int)__builtin_ctzll(avail);
}

static void emit_mask(gslb_policy_answer_t *out, uint64_t mask)
{
	for (uint64_t m = mask; m; m &= m - 1)
		out->idx[out->count++] = (uint8_t)__builtin_ctzll(m);
}

/* Up to @p n positions of @p mask by weight without replacement, in draw order. */
static void multi_pick(gslb_policy_answer_t *out, uint64_t mask, const uint32_t *w, unsigned n,
                       gslb_policy_rng_t *rng)
{
	while (n-- && mask) {
		unsigned i = weighted_pick(mask, w, rng);
		out->idx[out->count++] = (uint8_t)i;
		mask &= ~(UINT64_C(1) << i);
	}
}

/*
 * Weights (configured, or the admin's and slow start's from the health table) and persist
 * identities of the UP addresses @p up into @p w and @p ids. Returns the addresses to pick
 * from: those with a positive weight, or all of @p up as equals when every weight is 0 (an
 * admin drained them all: still better than no answer).
 */
static uint64_t load_weights(const gslb_health_t *health, const gslb_policy_dc_t *dc, uint64_t up,
                             uint32_t *w, uint64_t *ids)
{
	uint64_t positive = 0;
	for (uint64_t m = up; m; m &= m - 1) {
		unsigned i = (unsigned)__builtin_ctzll(m);
		w[i] = gslb_health_weight(health, dc->addrs[i].target, dc->addrs[i].weight);
		ids[i] = dc->addrs[i].hrw_id;
		if (w[i])
			positive |= UINT64_C(1) << i;
	}
	if (positive)
		return positive;
	for (uint64_t m = up; m; m &= m - 1)
		w[__builtin_ctzll(m)] = 1;
	return up;
}

/* The in-datacenter policy of @p dc over its UP addresses @p up (non-empty). */
static void pick_addrs(sel_t *s, unsigned dcidx, uint64_t up, gslb_policy_answer_t *out)
{
	const gslb_policy_dc_t *dc = &s->svc->dcs[dcidx];
	uint32_t w[GSLB_POLICY_ADDR_MAX];
	uint64_t ids[GSLB_POLICY_ADDR_MAX];
	if (dc->policy == GSLB_POLICY_WEIGHTED || dc->policy == GSLB_POLICY_MULTI ||
	    dc->policy == GSLB_POLICY_PERSIST)
		up = load_weights(s->health, dc, up, w, ids);
	switch (dc->policy) {
	case GSLB_POLICY_ALL:
		emit_mask(out, up);
		return;
	case GSLB_POLICY_FAILOVER:
		emit_mask(out, up & -up);
		return;
	case GSLB_POLICY_WEIGHTED:
		out->idx[out->count++] = (uint8_t)weighted_pick(up, w, s->rng);
		return;
	case GSLB_POLICY_MULTI:
		multi_pick(out, up, w, dc->multi, s->rng);
		return;
	case GSLB_POLICY_PERSIST:
		out->idx[out->count++] = (uint8_t)hrw_pick(up, w, ids, s->q->client_key);
		return;
	case GSLB_POLICY_ROUND_ROBIN:
		/* Slot 0 of the service is its datacenter-level counter. */
		out->idx[out->count++] = (uint8_t)rr_pick(up, s->rng, s->svc->rr_slot + 1u + dcidx);
		return;
	case GSLB_POLICY_GEO:
	case GSLB_POLICY_RTT:
	case GSLB_POLICY_COMPLETION_RATE:
	case GSLB_POLICY_HOPS:
	case GSLB_POLICY_QOS:
	case GSLB_POLICY_LEAST_CONNECTIONS:
	case GSLB_POLICY_CAPACITY:
	case GSLB_POLICY_PACKET_RATE:
	case GSLB_POLICY_KBPS:
		break;
	}
	/* prepare() rejects datacenter-only kinds here; answering all is the safe reading */
	emit_mask(out, up);
}

static void all_down(sel_t *s, gslb_policy_answer_t *out)
{
	const gslb_policy_svc_t *svc = s->svc;
	out->all_down = true;
	switch (svc->all_down) {
	case GSLB_ALLDOWN_FIRST_DC:
		for (unsigned p = 0; p < s->n; p++) {
			if (s->scan[p].fam) {
				out->dc = s->ord[p];
				emit_mask(out, s->scan[p].fam);
				return;
			}
		}
		/* unreachable: all_down() runs only when some datacenter has the family */
		break;
	case GSLB_ALLDOWN_FALLBACK:
		if (svc->fallback_cname) {
			out->kind = GSLB_ANSWER_CNAME;
			out->cname = svc->fallback_cname;
			return;
		}
		for (unsigned i = 0; i < svc->fallback_count; i++)
			if (svc->fallback[i].family == s->q->family)
				out->idx[out->count++] = (uint8_t)i;
		out->fallback = out->count > 0;
		if (!out->count)
			out->kind = GSLB_ANSWER_NODATA;
		return;
	case GSLB_ALLDOWN_NODATA:
		out->kind = GSLB_ANSWER_NODATA;
		return;
	case GSLB_ALLDOWN_SERVFAIL:
		out->kind = GSLB_ANSWER_SERVFAIL;
		return;
	}
	out->kind = GSLB_ANSWER_SERVFAIL;
}

void gslb_policy_select(const gslb_policy_svc_t *svc, const gslb_health_t *health,
                        const gslb_policy_query_t *q, gslb_policy_rng_t *rng,
                        gslb_policy_answer_t *out, gslb_policy_trace_t *trace)
{
	/* Not an initializer: that would zero the 1.5 KiB scan array on every query. */
	sel_t s;
	s.svc = svc;
	s.health = health;
	s.q = q;
	s.rng = rng;
	s.trace = trace;
	s.measured = gslb_policy_kind_measured(svc->policy) && q->measured_len > 0;
	s.pol = gslb_policy_kind_measured(svc->policy) && !s.measured ? svc->fallback_policy
	                                                              : svc->policy;
	s.cap = 0;
	s.scanned = 0;
	out->kind = GSLB_ANSWER_ADDRS;
	out->dc = GSLB_POLICY_DC_NONE;
	out->all_down = false;
	out->fallback = false;
	out->count = 0;
	out->cname = NULL;
	build_order(&s);
	int p = pick_dc(&s);
	if (p >= 0) {
		out->dc = s.ord[p];
		if (trace)
			trace->dcs[p].status = GSLB_DC_CHOSEN;
		pick_addrs(&s, out->dc, s.scan[p].up, out);
	} else {
		bool any_family = false;
		for (unsigned i = 0; i < s.n; i++)
			any_family |= s.scan[i].fam != 0;
		if (any_family)
			all_down(&s, out);
		else
			out->kind = GSLB_ANSWER_NODATA;
	}
	out->ttl = svc->ttl;
	if (s.cap && s.cap < out->ttl)
		out->ttl = s.cap;
	if (trace)
		trace->ttl_cap = s.cap;
}

/* ---- names ---- */

static const char *const policy_names[] = {
    [GSLB_POLICY_FAILOVER] = "failover",
    [GSLB_POLICY_GEO] = "geo",
    [GSLB_POLICY_ROUND_ROBIN] = "round-robin",
    [GSLB_POLICY_WEIGHTED] = "weighted",
    [GSLB_POLICY_PERSIST] = "persist",
    [GSLB_POLICY_MULTI] = "multi",
    [GSLB_POLICY_ALL] = "all",
    [GSLB_POLICY_RTT] = "rtt",
    [GSLB_POLICY_COMPLETION_RATE] = "completion-rate",
    [GSLB_POLICY_HOPS] = "hops",
    [GSLB_POLICY_QOS] = "qos",
    [GSLB_POLICY_LEAST_CONNECTIONS] = "least-connections",
    [GSLB_POLICY_CAPACITY] = "capacity",
    [GSLB_POLICY_PACKET_RATE] = "packet-rate",
    [GSLB_POLICY_KBPS] = "kbps",
};

static const char *const alldown_names[] = {
    [GSLB_ALLDOWN_FIRST_DC] = "first-datacenter",
    [GSLB_ALLDOWN_FALLBACK] = "fallback",
    [GSLB_ALLDOWN_NODATA] = "nodata",
    [GSLB_ALLDOWN_SERVFAIL] = "servfail",
};

int gslb_policy_kind_parse(const char *name, gslb_policy_kind_t *out)
{
	for (size_t i = 0; i < STEER_ARRAY_LEN(policy_names); i++) {
		if (strcasecmp(name, policy_names[i]) == 0) {
			*out = (gslb_policy_kind_t)i;
			return 0;
		}
	}
	return STEER_EINVAL;
}

const char *gslb_policy_kind_name(gslb_policy_kind_t kind)
{
	if ((size_t)kind < STEER_ARRAY_LEN(policy_names))
		return policy_names[kind];
	return "?";
}

bool gslb_policy_kind_dc_level(gslb_policy_kind_t kind)
{
	return kind == GSLB_POLICY_FAILOVER || kind == GSLB_POLICY_GEO ||
	       kind == GSLB_POLICY_ROUND_ROBIN || kind == GSLB_POLICY_WEIGHTED ||
	       kind == GSLB_POLICY_PERSIST || gslb_policy_kind_measured(kind);
}

bool gslb_policy_kind_in_dc(gslb_policy_kind_t kind)
{
	return kind <= GSLB_POLICY_ALL && kind != GSLB_POLICY_GEO;
}

bool gslb_policy_kind_measured(gslb_policy_kind_t kind)
{
	return kind >= GSLB_POLICY_RTT && kind <= GSLB_POLICY_KBPS;
}

bool gslb_policy_kind_by_path(gslb_policy_kind_t kind)
{
	return kind >= GSLB_POLICY_RTT && kind <= GSLB_POLICY_QOS;
}

int gslb_alldown_parse(const char *name, gslb_alldown_t *out)
{
	for (size_t i = 0; i < STEER_ARRAY_LEN(alldown_names); i++) {
		if (strcasecmp(name, alldown_names[i]) == 0) {
			*out = (gslb_alldown_t)i;
			return 0;
		}
	}
	return STEER_EINVAL;
}

const char *gslb_alldown_name(gslb_alldown_t a)
{
	if ((size_t)a < STEER_ARRAY_LEN(alldown_names))
		return alldown_names[a];
	return "?";
}

const char *gslb_dc_status_str(gslb_dc_status_t st, sa_family_t family)
{
	switch (st) {
	case GSLB_DC_UNSEEN:
		return "not examined";
	case GSLB_DC_CHOSEN:
		return "chosen";
	case GSLB_DC_CANDIDATE:
		return "available, not picked";
	case GSLB_DC_NO_FAMILY:
		return family == AF_INET ? "no IPv4 addresses" : "no IPv6 addresses";
	case GSLB_DC_DOWN:
		return "all DOWN";
	case GSLB_DC_FORCED_DOWN:
		return "all forced DOWN";
	}
	return "?";
}

/* ---- config-time checks ---- */

static uint64_t addr_id(const gslb_policy_addr_t *a)
{
	uint8_t b[17] = {(uint8_t)(a->family == AF_INET ? 4 : 6)};
	memcpy(b + 1, a->addr, 16);
	return hash_bytes(b, a->family == AF_INET ? 5 : 17, UINT64_C(0xadd7e55));
}

static const char *addr_str(const gslb_policy_addr_t *a, char *buf, size_t len)
{
	if (!inet_ntop(a->family, a->addr, buf, (socklen_t)len))
		snprintf(buf, len, "(family %d)", (int)a->family);
	return buf;
}

/* Checks an address set (a datacenter's or the fallback); fills persist identities. Family
 * masks go to @p m4 / @p m6. @p where names the set in messages. */
static int addrs_prepare(gslb_policy_addr_t *addrs, unsigned n, const char *where, uint64_t *m4,
                         uint64_t *m6, char *err, size_t errlen)
{
	char text[INET6_ADDRSTRLEN + 16];
	*m4 = *m6 = 0;
	for (unsigned i = 0; i < n; i++) {
		gslb_policy_addr_t *a = &addrs[i];
		if (a->family != AF_INET && a->family != AF_INET6) {
			snprintf(err, errlen, "%s: address %u has no IPv4/IPv6 family", where, i);
			return STEER_ECONF;
		}
		if (a->weight == 0) {
			snprintf(err, errlen, "%s: address %s: weight must be 1..65535", where,
			         addr_str(a, text, sizeof(text)));
			return STEER_ECONF;
		}
		/* so equal IPv4 addresses hash and compare equal */
		if (a->family == AF_INET)
			memset(a->addr + 4, 0, 12);
		for (unsigned j = 0; j < i; j++) {
			if (addrs[j].family == a->family && !memcmp(addrs[j].addr, a->addr, 16)) {
				snprintf(err, errlen, "%s: address %s listed twice", where,
				         addr_str(a, text, sizeof(text)));
				return STEER_ECONF;
			}
		}
		a->hrw_id = addr_id(a);
		*(a->family == AF_INET ? m4 : m6) |= UINT64_C(1) << i;
	}
	return 0;
}

static int dc_prepare(const gslb_policy_svc_t *svc, unsigned d, char *err, size_t errlen)
{
	gslb_policy_dc_t *dc = &svc->dcs[d];
	char where[256];
	snprintf(where, sizeof(where), "service %s, datacenter %s", svc->name, dc->name);
	if (!dc->addrs || dc->addr_count == 0 || dc->addr_count > GSLB_POLICY_ADDR_MAX) {
		snprintf(err, errlen, "%s: needs 1..%d addresses, has %u", where,
		         GSLB_POLICY_ADDR_MAX, dc->addrs ? dc->addr_count : 0);
		return STEER_ECONF;
	}
	if (!gslb_policy_kind_in_dc(dc->policy)) {
		snprintf(err, errlen, "%s: policy %s cannot pick addresses inside a datacenter",
		         where, gslb_policy_kind_name(dc->policy));
		return STEER_ECONF;
	}
	if (dc->policy == GSLB_POLICY_MULTI &&
	    (dc->multi == 0 || dc->multi > GSLB_POLICY_ADDR_MAX)) {
		snprintf(err, errlen, "%s: multi needs a count of 1..%d", where,
		         GSLB_POLICY_ADDR_MAX);
		return STEER_ECONF;
	}
	if (dc->weight == 0) {
		snprintf(err, errlen, "%s: weight must be 1..65535", where);
		return STEER_ECONF;
	}
	for (unsigned j = 0; j < d; j++) {
		if (!strcasecmp(svc->dcs[j].name, dc->name)) {
			snprintf(err, errlen, "%s: datacenter listed twice", where);
			return STEER_ECONF;
		}
	}
	dc->hrw_id = hash_bytes((const uint8_t *)dc->name, strlen(dc->name), UINT64_C(0xdc));
	return addrs_prepare(dc->addrs, dc->addr_count, where, &dc->mask4, &dc->mask6, err, errlen);
}

/* A wire name of unknown buffer size: find its end (bounded by the 255-octet limit), then
 * validate exactly that many bytes. */
static bool cname_valid(const uint8_t *name)
{
	size_t len = 0;
	while (len < DNS_DNAME_MAXLEN && name[len] != 0)
		len += 1u + name[len];
	if (len >= DNS_DNAME_MAXLEN)
		return false;
	return dname_is_valid(name, len + 1);
}

static int fallback_prepare(gslb_policy_svc_t *svc, char *err, size_t errlen)
{
	bool has_addrs = svc->fallback_count > 0;
	if (svc->all_down != GSLB_ALLDOWN_FALLBACK) {
		if (has_addrs || svc->fallback_cname) {
			snprintf(err, errlen,
			         "service %s: fallback given but all-down policy is %s", svc->name,
			         gslb_alldown_name(svc->all_down));
			return STEER_ECONF;
		}
		return 0;
	}
	if (has_addrs == (svc->fallback_cname != NULL)) {
		snprintf(err, errlen,
		         "service %s: all-down fallback needs either addresses or a CNAME target",
		         svc->name);
		return STEER_ECONF;
	}
	if (svc->fallback_cname && !cname_valid(svc->fallback_cname)) {
		snprintf(err, errlen, "service %s: invalid fallback CNAME target", svc->name);
		return STEER_ECONF;
	}
	if (has_addrs && (!svc->fallback || svc->fallback_count > GSLB_POLICY_ADDR_MAX)) {
		snprintf(err, errlen, "service %s: fallback needs 1..%d addresses", svc->name,
		         GSLB_POLICY_ADDR_MAX);
		return STEER_ECONF;
	}
	char where[256];
	snprintf(where, sizeof(where), "service %s, fallback", svc->name);
	uint64_t m4, m6;
	return addrs_prepare(svc->fallback, svc->fallback_count, where, &m4, &m6, err, errlen);
}

int gslb_policy_svc_prepare(gslb_policy_svc_t *svc, char *err, size_t errlen)
{
	if (!svc->name) {
		snprintf(err, errlen, "service without a name");
		return STEER_ECONF;
	}
	if (!svc->dcs || svc->dc_count == 0 || svc->dc_count > GSLB_POLICY_DC_MAX) {
		snprintf(err, errlen, "service %s: needs 1..%d datacenters", svc->name,
		         GSLB_POLICY_DC_MAX);
		return STEER_ECONF;
	}
	if (!gslb_policy_kind_dc_level(svc->policy)) {
		snprintf(err, errlen, "service %s: policy %s cannot pick datacenters", svc->name,
		         gslb_policy_kind_name(svc->policy));
		return STEER_ECONF;
	}
	if (gslb_policy_kind_measured(svc->policy) &&
	    (!gslb_policy_kind_dc_level(svc->fallback_policy) ||
	     gslb_policy_kind_measured(svc->fallback_policy))) {
		snprintf(err, errlen,
		         "service %s: fallback policy %s cannot decide without measurements (use "
		         "failover, geo, weighted, persist or round-robin)",
		         svc->name, gslb_policy_kind_name(svc->fallback_policy));
		return STEER_ECONF;
	}
	if ((size_t)svc->all_down >= STEER_ARRAY_LEN(alldown_names)) {
		snprintf(err, errlen, "service %s: unknown all-down policy", svc->name);
		return STEER_ECONF;
	}
	if (svc->ttl > GSLB_POLICY_TTL_MAX) {
		snprintf(err, errlen, "service %s: ttl above %u", svc->name, GSLB_POLICY_TTL_MAX);
		return STEER_ECONF;
	}
	for (unsigned d = 0; d < svc->dc_count; d++) {
		if (!svc->dcs[d].name) {
			snprintf(err, errlen, "service %s: datacenter %u has no name", svc->name,
			         d);
			return STEER_ECONF;
		}
		int ret = dc_prepare(svc, d, err, errlen);
		if (ret)
			return ret;
	}
	int ret = fallback_prepare(svc, err, errlen);
	if (ret)
		return ret;
	svc->rr_slot = (uint8_t)hash_bytes((const uint8_t *)svc->name, strlen(svc->name), 0);
	return 0;
}

/* ---- explain ---- */

typedef struct {
	char *buf;
	size_t len;
	size_t used; /* what snprintf semantics would have written */
} strbuf_t;

STEER_PRINTF(2, 3) static void sb_printf(strbuf_t *sb, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	size_t room = sb->used < sb->len ? sb->len - sb->used : 0;
	int n = vsnprintf(room ? sb->buf + sb->used : NULL, room, fmt, ap);
	va_end(ap);
	if (n > 0)
		sb->used += (size_t)n;
}

static void explain_dcs(strbuf_t *sb, const gslb_policy_svc_t *svc, const gslb_policy_query_t *q,
                        const gslb_policy_trace_t *t)
{
	for (unsigned p = 0; p < t->n && p < GSLB_POLICY_DC_MAX; p++) {
		const gslb_policy_trace_dc_t *e = &t->dcs[p];
		const gslb_policy_dc_t *dc = &svc->dcs[e->dc];
		sb_printf(sb, "  %u. %s: %s", p + 1, dc->name,
		          gslb_dc_status_str((gslb_dc_status_t)e->status, q->family));
		if (e->status != GSLB_DC_UNSEEN && e->status != GSLB_DC_NO_FAMILY) {
			sb_printf(sb, " (%u/%u up", e->up, e->total);
			if (e->forced_down)
				sb_printf(sb, ", %u forced down", e->forced_down);
			sb_printf(sb, ")");
		}
		if (e->status == GSLB_DC_CHOSEN)
			sb_printf(sb, ", in-datacenter %s", gslb_policy_kind_name(dc->policy));
		sb_printf(sb, "\n");
	}
}

static void explain_answer(strbuf_t *sb, const gslb_policy_svc_t *svc,
                           const gslb_policy_answer_t *ans)
{
	char text[DNAME_STR_MAXLEN > INET6_ADDRSTRLEN ? DNAME_STR_MAXLEN : INET6_ADDRSTRLEN];
	if (ans->all_down)
		sb_printf(sb, "all datacenters down: all-down policy %s\n",
		          gslb_alldown_name(svc->all_down));
	switch (ans->kind) {
	case GSLB_ANSWER_ADDRS:
		sb_printf(sb, "answer:");
		for (unsigned i = 0; i < ans->count; i++)
			sb_printf(
			    sb, " %s",
			    addr_str(gslb_policy_answer_addr(svc, ans, i), text, sizeof(text)));
		if (ans->fallback)
			sb_printf(sb, " (fallback addresses)\n");
		else
			sb_printf(sb, " (datacenter %s)\n", svc->dcs[ans->dc].name);
		break;
	case GSLB_ANSWER_CNAME:
		dname_to_str(ans->cname, text, sizeof(text));
		sb_printf(sb, "answer: CNAME %s\n", text);
		break;
	case GSLB_ANSWER_NODATA:
		sb_printf(sb, "answer: NODATA\n");
		break;
	case GSLB_ANSWER_SERVFAIL:
		sb_printf(sb, "answer: SERVFAIL\n");
		break;
	case GSLB_ANSWER_TXT: /* whoami only; a policy never answers it */
		break;
	}
}

int gslb_policy_explain(const gslb_policy_svc_t *svc, const gslb_policy_query_t *q,
                        const gslb_policy_answer_t *ans, const gslb_policy_trace_t *trace,
                        char *buf, size_t len)
{
	strbuf_t sb = {buf, len, 0};
	if (len)
		buf[0] = '\0';
	sb_printf(&sb, "service %s: policy %s, %s query, all-down %s\n", svc->name,
	          gslb_policy_kind_name(svc->policy), q->family == AF_INET ? "IPv4" : "IPv6",
	          gslb_alldown_name(svc->all_down));
	if (trace->policy != svc->policy)
		sb_printf(&sb, "no measurement for this client: fallback policy %s decides\n",
		          gslb_policy_kind_name(trace->policy));
	else if (gslb_policy_kind_measured(svc->policy) && trace->n > trace->n_measured)
		sb_printf(&sb, "from %u. on: no measurement, in the %s order\n",
		          trace->n_measured + 1,
		          svc->fallback_policy == GSLB_POLICY_GEO ? "map's" : "configured");
	explain_dcs(&sb, svc, q, trace);
	explain_answer(&sb, svc, ans);
	if (trace->ttl_cap && trace->ttl_cap < svc->ttl)
		sb_printf(&sb, "ttl: %u (service %u, capped by health)\n", ans->ttl, svc->ttl);
	else
		sb_printf(&sb, "ttl: %u\n", ans->ttl);
	return (int)sb.used;
}
