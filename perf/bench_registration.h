// Owns the declarations of the benchmarks registered at run time rather than in static initialisation: those whose
// cases need what other files register before main() (the layer kinds).
#pragma once

namespace ringtrain {

void register_backend_layer_benchmarks();  // bench_layers_backend.cpp

}  // namespace ringtrain
