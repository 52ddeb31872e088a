// SPDX-License-Identifier: GPL-2.0-only
/*
 * pin.c - `latch kit pin KIT NAME@VERSION`: a newer installer, pinned.
 *
 * The registry's dist.integrity for that version is taken once, now, and
 * written into a kit file of the operator's (/etc/latch/kits/KIT.yaml);
 * from then on every fetch is held to it, whatever the registry says later.
 * Only the entry's version and integrity change: the rest of the file (or
 * of the built-in it copies) stays byte for byte, comments and all, so the
 * edit is found by libyaml's marks rather than by rewriting the YAML.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

#include "kit/raw.h"

static const char *scalar(yaml_document_t *doc, int id)
{
	yaml_node_t *n = yaml_document_get_node(doc, id);

	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* The value node of KEY in mapping N, or NULL. */
static yaml_node_t *value_of(yaml_document_t *doc, yaml_node_t *n, const char *key)
{
	if (!n || n->type != YAML_MAPPING_NODE)
		return NULL;
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
		const char *k = scalar(doc, p->key);

		if (k && !strcmp(k, key))
			return yaml_document_get_node(doc, p->value);
	}
	return NULL;
}

/* The setup entry of package NAME, or NULL. */
static yaml_node_t *entry_of(yaml_document_t *doc, const char *name)
{
	yaml_node_t *list = value_of(doc, yaml_document_get_root_node(doc), "setup");

	if (!list || list->type != YAML_SEQUENCE_NODE)
		return NULL;
	for (yaml_node_item_t *it = list->data.sequence.items.start; it < list->data.sequence.items.top; it++) {
		yaml_node_t *e = yaml_document_get_node(doc, *it);
		yaml_node_t *npm = value_of(doc, e, "npm");

		if (npm && npm->type == YAML_SCALAR_NODE && !strcmp((const char *)npm->data.scalar.value, name))
			return e;
	}
	return NULL;
}

int latch_kit_pin_text(const char *text, size_t len, const char *source, const char *name, const char *version,
		       const char *integrity, char **out, char *err, size_t errlen)
{
	yaml_parser_t parser;
	yaml_document_t doc;
	yaml_node_t *e, *v, *i;
	size_t v0, v1, i0, i1, cap;
	int ret = 0;

	*out = NULL;
	if (!yaml_parser_initialize(&parser))
		return latch_errf(err, errlen, -ENOMEM, "%s: out of memory", source);
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		yaml_parser_delete(&parser);
		return latch_errf(err, errlen, -EINVAL, "%s: not valid YAML; run `latch kit check` on it", source);
	}
	e = entry_of(&doc, name);
	v = value_of(&doc, e, "version");
	i = value_of(&doc, e, "integrity");
	if (!e || !v || !i || v->type != YAML_SCALAR_NODE || i->type != YAML_SCALAR_NODE) {
		ret = latch_errf(err, errlen, -ENOENT,
				 "%s: no setup entry for npm package %s with a version and an integrity to pin; add "
				 "one (docs/kits.md)",
				 source, name);
		goto out;
	}
	v0 = v->start_mark.index, v1 = v->end_mark.index;
	i0 = i->start_mark.index, i1 = i->end_mark.index;
	if (v1 > i0 && i1 > v0) { /* can't be: two scalars of one mapping */
		ret = latch_errf(err, errlen, -EINVAL, "%s: version and integrity overlap", source);
		goto out;
	}
	cap = len + strlen(version) + strlen(integrity) + 8;
	*out = malloc(cap);
	if (!*out) {
		ret = latch_errf(err, errlen, -ENOMEM, "%s: out of memory", source);
		goto out;
	}
	/* each value double-quoted: neither can hold a '"' or a '\\' (checked by the caller's parse) */
	if (v0 < i0)
		snprintf(*out, cap, "%.*s\"%s\"%.*s\"%s\"%s", (int)v0, text, version, (int)(i0 - v1), text + v1,
			 integrity, text + i1);
	else
		snprintf(*out, cap, "%.*s\"%s\"%.*s\"%s\"%s", (int)i0, text, integrity, (int)(v0 - i1), text + i1,
			 version, text + v1);
out:
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	return ret;
}

int latch_kit_text(const struct latch_kit *kit, char **text, size_t *len, char *err, size_t errlen)
{
	const char *builtin = kit->builtin ? latch_kit_builtin_text(kit->name) : NULL;

	if (builtin) {
		*len = strlen(builtin);
		*text = strdup(builtin);
		return *text ? 0 : latch_errf(err, errlen, -ENOMEM, "kit %s: out of memory", kit->name);
	}
	/* the file the kit was loaded from, under the same checks, read again */
	return kit_read_checked(kit->source, LATCH_FILE_CONFIG, LATCH_KIT_FILE_MAX, text, len, err, errlen);
}
