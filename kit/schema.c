// SPDX-License-Identifier: GPL-2.0-only
/*
 * schema.c - read a kit file: the libcyaml schema, and a walk of libyaml's
 * document tree for the two things a schema can't do.
 *
 * libcyaml loads every field it has a schema for (the tables below are the
 * one list of the fields latch reads).  Two things are beyond it: a
 * credential's `env` is a mapping whose keys the kit chooses, and with
 * CYAML_CFG_IGNORE_UNKNOWN_KEYS it skips the fields it does not know without
 * saying which.  So the file is first loaded as libyaml's document tree and
 * walked beside the same tables: it reads `env`, names every key the tables
 * don't have (kosa8's `image`, and whatever a newer kosa8 adds: one warning,
 * never a refusal), and gives syntax errors and aliases their line.  No YAML
 * is parsed here by hand.
 */
#include <cyaml/cyaml.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "kit/raw.h"

/* ---- the schema: what latch reads of a kit */

static const cyaml_schema_value_t string_entry = {
	CYAML_VALUE_STRING(CYAML_FLAG_POINTER, char, 0, CYAML_UNLIMITED),
};

/* Every field is optional to libcyaml: validate.c says what is missing, naming the credential. */
#define OPT_STR(key, type, member) \
	CYAML_FIELD_STRING_PTR(key, CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL, type, member, 0, CYAML_UNLIMITED)
#define OPT_LIST(key, type, member, entry) \
	CYAML_FIELD_SEQUENCE(key, CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL, type, member, entry, 0, CYAML_UNLIMITED)

static const cyaml_schema_field_t caps_fields[] = {
	CYAML_FIELD_UINT_PTR("requests_per_hour", CYAML_FLAG_OPTIONAL, struct raw_caps, requests_per_hour),
	CYAML_FIELD_UINT_PTR("requests_per_day", CYAML_FLAG_OPTIONAL, struct raw_caps, requests_per_day),
	OPT_STR("dollars_per_day", struct raw_caps, dollars_per_day),
	CYAML_FIELD_END,
};

/* What a credential and an alternative both say of their upstream and its key. */
#define UPSTREAM_FIELDS(type)                                                                              \
	OPT_STR("name", type, name), OPT_STR("upstream", type, upstream), OPT_STR("secret", type, secret), \
		OPT_STR("secret_file", type, secret_file), OPT_STR("header", type, header),                \
		OPT_STR("scheme", type, scheme), OPT_STR("provider", type, provider),                      \
		OPT_STR("ca_file", type, ca_file)

static const cyaml_schema_field_t alt_fields[] = {
	UPSTREAM_FIELDS(struct raw_alt),
	OPT_STR("base_path", struct raw_alt, base_path),
	CYAML_FIELD_END,
};

static const cyaml_schema_value_t alt_entry = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct raw_alt, alt_fields),
};

static const cyaml_schema_field_t priced_fields[] = {
	OPT_STR("method", struct raw_priced, method),
	OPT_STR("path", struct raw_priced, path),
	OPT_STR("dollars_per_request", struct raw_priced, dollars_per_request),
	CYAML_FIELD_END,
};

static const cyaml_schema_value_t priced_entry = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct raw_priced, priced_fields),
};

#define ENV_KEY "env"

static const cyaml_schema_field_t cred_fields[] = {
	UPSTREAM_FIELDS(struct raw_cred),
	OPT_LIST("methods", struct raw_cred, methods, &string_entry),
	OPT_LIST("paths", struct raw_cred, paths, &string_entry),
	/* keys of the kit's choosing: read by the document walk below */
	CYAML_FIELD_IGNORE(ENV_KEY, CYAML_FLAG_OPTIONAL),
	CYAML_FIELD_MAPPING_PTR("caps", CYAML_FLAG_OPTIONAL, struct raw_cred, caps, caps_fields),
	OPT_LIST("alternatives", struct raw_cred, alternatives, &alt_entry),
	OPT_LIST("priced_endpoints", struct raw_cred, priced_endpoints, &priced_entry),
	OPT_LIST("allow_provider_tools", struct raw_cred, allow_provider_tools, &string_entry),
	CYAML_FIELD_END,
};

static const cyaml_schema_value_t cred_entry = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct raw_cred, cred_fields),
};

#define CREDS_KEY "credentials"
#define SETUP_KEY "setup"

static const cyaml_schema_field_t setup_fields[] = {
	OPT_STR("npm", struct raw_setup, npm),
	OPT_STR("version", struct raw_setup, version),
	OPT_STR("integrity", struct raw_setup, integrity),
	OPT_LIST("bin", struct raw_setup, bin, &string_entry),
	CYAML_FIELD_END,
};

static const cyaml_schema_value_t setup_entry = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct raw_setup, setup_fields),
};

static const cyaml_schema_field_t kit_fields[] = {
	OPT_STR("name", struct raw_kit, name),
	OPT_STR("description", struct raw_kit, description),
	OPT_STR("provider", struct raw_kit, provider),
	OPT_LIST("command", struct raw_kit, command, &string_entry),
	OPT_LIST("egress_allow", struct raw_kit, egress_allow, &string_entry),
	OPT_LIST(CREDS_KEY, struct raw_kit, credentials, &cred_entry),
	OPT_LIST(SETUP_KEY, struct raw_kit, setup, &setup_entry),
	CYAML_FIELD_END,
};

static const cyaml_schema_value_t kit_schema = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_POINTER, struct raw_kit, kit_fields),
};

/* ---- the document walk */

struct walk {
	yaml_document_t *doc;
	const char *source;
	struct raw_doc *out;
	unsigned char *seen; /* per node: an alias is a node reached twice */
	int n_nodes;
	size_t unknown_len;
	char *err;
	size_t errlen;
};

static int line_of(const yaml_node_t *n)
{
	return (int)n->start_mark.line + 1;
}

static yaml_node_t *node_at(struct walk *w, int id)
{
	yaml_node_t *n = yaml_document_get_node(w->doc, id);

	if (!n)
		return NULL;
	if (w->seen[id - 1]++)
		return NULL; /* the caller reports it as an alias */
	return n;
}

static int alias_error(struct walk *w, int id)
{
	yaml_node_t *n = yaml_document_get_node(w->doc, id);

	return latch_errf_at(w->err, w->errlen, -EINVAL, w->source, n ? line_of(n) : 0,
			     "anchors and aliases (&name, *name) are not read in kits; write the value out where it "
			     "is used");
}

/* A scalar's text as a C string, or NULL when it is no scalar or holds a NUL byte. */
static const char *scalar_of(const yaml_node_t *n)
{
	if (!n || n->type != YAML_SCALAR_NODE)
		return NULL;
	if (memchr(n->data.scalar.value, '\0', n->data.scalar.length))
		return NULL;
	return (const char *)n->data.scalar.value;
}

/* The value of KEY in mapping N, when it is a plain scalar (for naming a credential in a message). */
static const char *mapping_scalar(struct walk *w, const yaml_node_t *n, const char *key)
{
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
		const char *k = scalar_of(yaml_document_get_node(w->doc, p->key));

		if (k && !strcmp(k, key))
			return scalar_of(yaml_document_get_node(w->doc, p->value));
	}
	return NULL;
}

/* Add WHERE+KEY to the list of fields latch does not read, once. */
static void note_unknown(struct walk *w, const char *where, const char *key)
{
	char item[160];
	char *list = w->out->unknown;
	size_t cap = sizeof(w->out->unknown);
	/* an empty key is named "": an empty item would match anywhere in the list */
	int n = snprintf(item, sizeof(item), "%s%s", where, *key ? key : "\"\"");

	if (n < 0 || (size_t)n >= sizeof(item))
		return;
	for (const char *p = list; (p = strstr(p, item)); p++)
		if ((p == list || (p - list >= 2 && p[-2] == ',')) && (p[n] == ',' || !p[n]))
			return;
	if (w->unknown_len + n + 3 >= cap) {
		/* too many to list: say so once, at the end */
		if (w->unknown_len + 5 < cap && !strstr(list, ", ..."))
			w->unknown_len += snprintf(list + w->unknown_len, cap - w->unknown_len, ", ...");
		return;
	}
	w->unknown_len +=
		snprintf(list + w->unknown_len, cap - w->unknown_len, "%s%s", w->unknown_len ? ", " : "", item);
}

static const cyaml_schema_field_t *field_of(const cyaml_schema_field_t *fields, const char *key)
{
	for (; fields->key; fields++)
		if (!strcmp(fields->key, key))
			return fields;
	return NULL;
}

/* Credential CRED's `env:` mapping N into out->env[cred]. */
static int read_env(struct walk *w, yaml_node_t *n, int cred, const char *where)
{
	int count, i = 0;

	if (cred < 0 || cred >= w->out->n_creds || w->out->env[cred])
		return 0; /* can't be: walk_mapping() refuses a key given twice before its value is read */
	w->out->env_line[cred] = line_of(n);
	if (n->type != YAML_MAPPING_NODE)
		return latch_errf_at(w->err, w->errlen, -EINVAL, w->source, line_of(n),
				     "%senv must be a mapping of VARIABLE: \"value\" lines", where);
	count = n->data.mapping.pairs.top - n->data.mapping.pairs.start;
	w->out->env[cred] = calloc(count ? count : 1, sizeof(struct raw_env));
	if (!w->out->env[cred])
		return latch_errf(w->err, w->errlen, -ENOMEM, "%s: out of memory", w->source);
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
		yaml_node_t *k = node_at(w, p->key), *v;
		const char *name, *value;

		if (!k)
			return alias_error(w, p->key);
		v = node_at(w, p->value);
		if (!v)
			return alias_error(w, p->value);
		name = scalar_of(k);
		if (!name)
			return latch_errf_at(w->err, w->errlen, -EINVAL, w->source, line_of(k),
					     "%senv: a variable's name must be a plain word such as API_KEY", where);
		value = scalar_of(v);
		if (!value)
			return latch_errf_at(w->err, w->errlen, -EINVAL, w->source, line_of(v),
					     "%senv %s is not one value; quote it, e.g. %s: \"{{url}}\" (unquoted "
					     "braces are a YAML mapping)",
					     where, name, name);
		w->out->env[cred][i].name = strdup(name);
		w->out->env[cred][i].value = strdup(value);
		w->out->env[cred][i].line = line_of(k);
		w->out->n_env[cred] = ++i; /* counted before the check, so kit_raw_free() frees a half pair */
		if (!w->out->env[cred][i - 1].name || !w->out->env[cred][i - 1].value)
			return latch_errf(w->err, w->errlen, -ENOMEM, "%s: out of memory", w->source);
	}
	return 0;
}

static int walk_mapping(struct walk *w, yaml_node_t *n, const cyaml_schema_field_t *fields, const char *where,
			int cred);

/* The value V of a known field F: scalars are checked, mappings and lists walked. */
static int walk_value(struct walk *w, yaml_node_t *v, const cyaml_schema_field_t *f, const char *where, int cred)
{
	const cyaml_schema_value_t *entry;

	if (v->type == YAML_SCALAR_NODE) {
		if (!scalar_of(v))
			return latch_errf_at(w->err, w->errlen, -EINVAL, w->source, line_of(v),
					     "%s%s has a NUL byte (\\0); remove it", where, f->key);
		return 0;
	}
	if (f->value.type == CYAML_MAPPING && v->type == YAML_MAPPING_NODE)
		return walk_mapping(w, v, f->value.mapping.fields, where, cred);
	if (f->value.type != CYAML_SEQUENCE || v->type != YAML_SEQUENCE_NODE)
		return 0; /* a wrong shape: libcyaml names it next */
	entry = f->value.sequence.entry;
	/* a route's empty list would read as "none allowed" but load as "any": say which to write */
	if ((!strcmp(f->key, "methods") || !strcmp(f->key, "paths")) &&
	    v->data.sequence.items.top == v->data.sequence.items.start)
		return latch_errf_at(w->err, w->errlen, -EINVAL, w->source, line_of(v),
				     "%s%s is an empty list; list what the route allows, or leave %s out for %s", where,
				     f->key, f->key,
				     !strcmp(f->key, "methods") ? "every method but TRACE and CONNECT" : "every path");
	for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
		yaml_node_t *item = node_at(w, *it);
		int ret = 0;

		if (!item)
			return alias_error(w, *it);
		if (entry->type == CYAML_MAPPING && item->type == YAML_MAPPING_NODE) {
			char sub[128];
			bool is_setup = !strcmp(f->key, SETUP_KEY);
			const char *name = mapping_scalar(w, item, is_setup ? "npm" : "name");
			bool is_cred = !strcmp(f->key, CREDS_KEY);
			const char *what = is_cred			       ? "credential" :
					   is_setup			       ? "setup" :
					   !strcmp(f->key, "priced_endpoints") ? "priced endpoint" :
										 "alternative";
			int idx = is_cred ? (int)(it - v->data.sequence.items.start) : cred;

			if (name)
				snprintf(sub, sizeof(sub), "%s%s \"%.40s\": ", where, what, name);
			else
				snprintf(sub, sizeof(sub), "%s%s %d: ", where, what,
					 (int)(it - v->data.sequence.items.start) + 1);
			ret = walk_mapping(w, item, entry->mapping.fields, sub, idx);
		} else if (entry->type == CYAML_MAPPING && item->type == YAML_SCALAR_NODE &&
			   !strcmp(f->key, SETUP_KEY)) {
			/* kosa8 writes commands here; a command installs whatever it fetches, unverified */
			ret = latch_errf_at(
				w->err, w->errlen, -EINVAL, w->source, line_of(item),
				"%ssetup entry \"%.60s\" is a command, and latch will not run an installer "
				"it cannot verify; write {npm: NAME, version: EXACT, integrity: sha512-...} "
				"(docs/kits.md)",
				where, scalar_of(item) ? scalar_of(item) : "");
		} else if (item->type == YAML_SCALAR_NODE && !scalar_of(item)) {
			ret = latch_errf_at(w->err, w->errlen, -EINVAL, w->source, line_of(item),
					    "%s%s has a NUL byte (\\0); remove it", where, f->key);
		}
		if (ret)
			return ret;
	}
	return 0;
}

static int walk_mapping(struct walk *w, yaml_node_t *n, const cyaml_schema_field_t *fields, const char *where, int cred)
{
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
		yaml_node_t *k = node_at(w, p->key), *v;
		const cyaml_schema_field_t *f;
		const char *key;
		int ret;

		if (!k)
			return alias_error(w, p->key);
		key = scalar_of(k);
		if (!key)
			continue; /* a key that is no word: libcyaml refuses it next */
		for (yaml_node_pair_t *q = n->data.mapping.pairs.start; q < p; q++) {
			const char *before = scalar_of(yaml_document_get_node(w->doc, q->key));

			if (before && !strcmp(before, key))
				return latch_errf_at(w->err, w->errlen, -EINVAL, w->source, line_of(k),
						     "%s%s is given twice; keep one", where, key);
		}
		f = field_of(fields, key);
		if (!f) {
			note_unknown(w, where, key);
			continue;
		}
		v = node_at(w, p->value);
		if (!v)
			return alias_error(w, p->value);
		if (!strcmp(key, ENV_KEY) && fields == cred_fields)
			ret = read_env(w, v, cred, where);
		else
			ret = walk_value(w, v, f, where, cred);
		if (ret)
			return ret;
	}
	return 0;
}

/* The number of credentials the tree has, to size the env tables (0 when it has no list). */
static int count_creds(yaml_document_t *doc, yaml_node_t *root)
{
	for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
		const char *k = scalar_of(yaml_document_get_node(doc, p->key));
		yaml_node_t *v = yaml_document_get_node(doc, p->value);

		if (k && !strcmp(k, CREDS_KEY) && v && v->type == YAML_SEQUENCE_NODE)
			return v->data.sequence.items.top - v->data.sequence.items.start;
	}
	return 0;
}

static int read_tree(const char *text, size_t len, const char *source, struct raw_doc *out, char *err, size_t errlen)
{
	yaml_parser_t parser;
	yaml_document_t doc, extra;
	yaml_node_t *root;
	struct walk w = { .doc = &doc, .source = source, .out = out, .err = err, .errlen = errlen };
	int ret = 0;

	if (!yaml_parser_initialize(&parser))
		return latch_errf(err, errlen, -ENOMEM, "%s: out of memory", source);
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		ret = latch_errf_at(err, errlen, -EINVAL, source, (int)parser.problem_mark.line + 1,
				    "not valid YAML: %s%s%s", parser.problem ? parser.problem : "syntax error",
				    parser.context ? " " : "", parser.context ? parser.context : "");
		yaml_parser_delete(&parser);
		return ret;
	}
	root = yaml_document_get_root_node(&doc);
	if (!root) {
		ret = latch_errf_at(err, errlen, -EINVAL, source, 0, "is empty; a kit has at least a name: line");
		goto out;
	}
	if (root->type != YAML_MAPPING_NODE) {
		ret = latch_errf_at(err, errlen, -EINVAL, source, line_of(root),
				    "a kit is a mapping of fields (name:, egress_allow:, credentials:, ...)");
		goto out;
	}
	/* a second document would be ignored by libcyaml: refuse it rather than half-read the file */
	if (yaml_parser_load(&parser, &extra)) {
		bool more = yaml_document_get_root_node(&extra) != NULL;

		yaml_document_delete(&extra);
		if (more) {
			ret = latch_errf_at(err, errlen, -EINVAL, source, 0,
					    "holds more than one YAML document (---); a kit file holds one kit");
			goto out;
		}
	}
	w.n_nodes = doc.nodes.top - doc.nodes.start;
	out->n_creds = count_creds(&doc, root);
	w.seen = calloc(w.n_nodes, 1);
	out->env = calloc(out->n_creds + 1, sizeof(*out->env));
	out->n_env = calloc(out->n_creds + 1, sizeof(*out->n_env));
	out->env_line = calloc(out->n_creds + 1, sizeof(*out->env_line));
	if (!w.seen || !out->env || !out->n_env || !out->env_line) {
		ret = latch_errf(err, errlen, -ENOMEM, "%s: out of memory", source);
		goto out;
	}
	w.seen[0] = 1; /* the root (node 1) */
	ret = walk_mapping(&w, root, kit_fields, "", -1);
out:
	free(w.seen);
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	return ret;
}

/* ---- libcyaml, and its errors as one line */

struct cy_log {
	char reason[200]; /* the first error line, without "Load: " */
	char field[64]; /* the innermost mapping field of the backtrace */
	int line; /* and the innermost line */
};

static void cy_log_fn(cyaml_log_t level, void *ctx, const char *fmt, va_list args)
{
	struct cy_log *l = ctx;
	char msg[256], field[64];
	int line;

	if (level < CYAML_LOG_ERROR)
		return;
	vsnprintf(msg, sizeof(msg), fmt, args);
	msg[strcspn(msg, "\n")] = '\0';
	if (sscanf(msg, "  in mapping field '%63[^']' (line: %d", field, &line) == 2) {
		if (!l->field[0])
			snprintf(l->field, sizeof(l->field), "%s", field);
		if (!l->line)
			l->line = line;
	} else if (sscanf(msg, "  in sequence entry '%*u' (line: %d", &line) == 1) {
		if (!l->line)
			l->line = line;
	} else if (!l->reason[0] && strncmp(msg, "Load: Backtrace", 15)) {
		snprintf(l->reason, sizeof(l->reason), "%.199s", strncmp(msg, "Load: ", 6) ? msg : msg + 6);
	}
}

/*
 * libcyaml's reason, in the words of a kit's author: a phrase that follows
 * the field's name ("methods must be a list ..."), or, for a reason not
 * known here, libcyaml's own words after a colon (*colon set).
 */
static const char *cy_reason(const struct cy_log *l, cyaml_err_t e, char *buf, size_t len, bool *colon)
{
	const char *r = l->reason, *v;

	*colon = false;
	if (e == CYAML_ERR_ALIAS)
		return "anchors and aliases (&name, *name) are not read in kits; write the value out where it is used";
	if (!strncmp(r, "Expecting SEQUENCE", 18))
		return "must be a list: [a, b], or one '- item' a line";
	if (!strncmp(r, "Expecting MAPPING", 17))
		return "must be a mapping of 'key: value' lines";
	if (!strncmp(r, "Expecting ", 10))
		return "must be one value, not a list or a mapping";
	if (!strncmp(r, "Invalid ", 8) && strstr(r, "INT") && (v = strstr(r, " value: "))) {
		snprintf(buf, len, "must be a whole number of 0 to 4294967295, not %s", v + 8);
		return buf;
	}
	if (!strncmp(r, "Invalid uint64_t value: ", 24)) {
		snprintf(buf, len, "must be a whole number of 0 to 4294967295, not %s", r + 24);
		return buf;
	}
	if (!strncmp(r, "Mapping field already seen: ", 28))
		return "is given twice; keep one";
	*colon = true;
	return r[0] ? r : cyaml_strerror(e);
}

int kit_raw_read(const char *text, size_t len, const char *source, struct raw_kit **kit, struct raw_doc *doc, char *err,
		 size_t errlen)
{
	struct cy_log log = { 0 };
	cyaml_config_t cfg = {
		.log_fn = cy_log_fn,
		.log_ctx = &log,
		.mem_fn = cyaml_mem,
		.log_level = CYAML_LOG_ERROR,
		.flags = CYAML_CFG_IGNORE_UNKNOWN_KEYS | CYAML_CFG_NO_ALIAS,
	};
	cyaml_err_t e;
	char buf[256];
	int ret;

	*kit = NULL;
	memset(doc, 0, sizeof(*doc));
	ret = read_tree(text, len, source, doc, err, errlen);
	if (ret) {
		kit_raw_free(NULL, doc);
		return ret;
	}
	e = cyaml_load_data((const uint8_t *)text, len, &cfg, &kit_schema, (cyaml_data_t **)kit, NULL);
	if (e != CYAML_OK) {
		bool colon;
		const char *why = cy_reason(&log, e, buf, sizeof(buf), &colon);

		*kit = NULL;
		kit_raw_free(NULL, doc);
		if (e == CYAML_ERR_OOM)
			return latch_errf(err, errlen, -ENOMEM, "%s: out of memory", source);
		if (log.field[0])
			return latch_errf_at(err, errlen, -EINVAL, source, log.line, "%s%s %s", log.field,
					     colon ? ":" : "", why);
		return latch_errf_at(err, errlen, -EINVAL, source, log.line, "%s", why);
	}
	if ((int)(*kit)->credentials_count != doc->n_creds) { /* the two readers must agree */
		kit_raw_free(*kit, doc);
		*kit = NULL;
		return latch_errf_at(err, errlen, -EINVAL, source, 0, "credentials: could not be read as a list");
	}
	return 0;
}

void kit_raw_free(struct raw_kit *kit, struct raw_doc *doc)
{
	cyaml_config_t cfg = { .mem_fn = cyaml_mem, .log_level = CYAML_LOG_ERROR };

	if (kit)
		cyaml_free(&cfg, &kit_schema, kit, 0);
	if (!doc)
		return;
	for (int i = 0; doc->env && i < doc->n_creds; i++) {
		for (int j = 0; doc->env[i] && j < doc->n_env[i]; j++) {
			free(doc->env[i][j].name);
			free(doc->env[i][j].value);
		}
		free(doc->env[i]);
	}
	free(doc->env);
	free(doc->n_env);
	free(doc->env_line);
	memset(doc, 0, sizeof(*doc));
}
