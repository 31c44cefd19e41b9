/*
 * RRL and cookie state across reloads. A random secret must not change on reload, or every
 * client's cookie would turn invalid; the RRL table is kept so a reload does not hand a
 * flood a fresh allowance.
 */
#include "daemon/hardening.h"

#include <string.h>
#include <sys/random.h>

#include "base/log.h"

void hardening_init(hardening_t *h)
{
	memset(h, 0, sizeof(*h));
	if (getrandom(h->random_secret, sizeof(h->random_secret), 0) !=
	    (ssize_t)sizeof(h->random_secret))
		log_warn("cookies: getrandom failed; the server cookie secret is weak, set "
		         "cookies.secret");
}

void hardening_view(hardening_t *h, const conf_t *conf, auth_view_t *view)
{
	const conf_cookies_t *c = &conf->cookies;
	view->cookies_enable = c->enable;
	view->cookies_require = c->enable && c->require;
	memcpy(view->cookies.secret, c->secret_set ? c->secret : h->random_secret,
	       DNS_COOKIE_SECRET_LEN);
	view->cookies.has_previous = c->secret_set && c->previous_set;
	if (view->cookies.has_previous)
		memcpy(view->cookies.previous, c->previous, DNS_COOKIE_SECRET_LEN);

	const conf_rrl_t *r = &conf->rrl;
	size_t want = r->rate > 0 ? r->table_size : 0;
	size_t have = h->table ? auth_rrl_table_size(h->table) : 0;
	if (want != have) {
		STEER_ASSERT(h->retired == NULL || h->table == NULL);
		if (h->table) {
			auth_rrl_table_free(h->retired);
			h->retired = h->table;
		}
		h->table = want > 0 ? auth_rrl_table_new(want) : NULL;
	}
	auth_rrl_conf_t *rc = &view->rrl.conf;
	rc->rate = r->rate;
	rc->nxdomain_rate = r->nxdomain_rate ? r->nxdomain_rate : r->rate;
	rc->error_rate = r->error_rate ? r->error_rate : r->rate;
	rc->slip = r->slip;
	rc->window = r->window / 1000 > 0 ? r->window / 1000 : 1;
	rc->ipv4_prefix = r->ipv4_prefix;
	rc->ipv6_prefix = r->ipv6_prefix;
	rc->exempt = r->exempt;
	rc->n_exempt = r->n_exempt;
	rc->exempt_cookies = r->exempt_cookies && c->enable;
	rc->log_only = r->log_only;
	view->rrl.table = h->table;
}

void hardening_retire(hardening_t *h)
{
	auth_rrl_table_free(h->retired);
	h->retired = NULL;
}

void hardening_deinit(hardening_t *h)
{
	hardening_retire(h);
	auth_rrl_table_free(h->table);
	h->table = NULL;
	explicit_bzero(h->random_secret, sizeof(h->random_secret));
}
