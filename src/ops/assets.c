/*
 * Look-up in the generated asset table (see assets.h). A handful of files: a linear search
 * costs nothing next to an HTTP request.
 */
#include "ops/assets.h"

#include <string.h>

const ops_asset_t *ops_asset_find(const char *path)
{
	for (size_t i = 0; i < ops_assets_count; i++) {
		if (strcmp(ops_assets[i].path, path) == 0)
			return &ops_assets[i];
	}
	return NULL;
}
