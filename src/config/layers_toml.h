// Owns writing a model's layers as job-file TOML, the writing twin of the job reader's [[model.layers]]: each
// top-level layer a [[model.layers]] table, a residual block's body and shortcut arrays of inline tables, every
// key the type's default leaves different written (required ones always), so the reader gives the same specs back.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "config/layer_spec.h"

namespace ringtrain::config {

// "[[model.layers]]\ntype = ...\n..." for every layer, tables separated by blank lines.
std::string layers_toml(const std::vector<LayerSpec>& layers);

// A TOML basic string: quoted, with quotes, backslashes and control characters escaped.
std::string toml_string(std::string_view text);

}  // namespace ringtrain::config
