// Which oneDNN 3.2 implementation an fp16 training step would get on this CPU (AVX512_FP16, no AMX-FP16): conv2's
// three directions (NHWC and oneDNN's layout) and the dense forward as a matmul. Prints the implementation names only.
//   g++ -O2 -I.venv-onednn/include fp16_implementations.cpp -o /tmp/f16q -L.venv-onednn/lib -ldnnl \
//       -Wl,-rpath,$PWD/.venv-onednn/lib && /tmp/f16q
#include <cstdio>
#include <oneapi/dnnl/dnnl.hpp>
using namespace dnnl; using tag=memory::format_tag; using dt=memory::data_type;
int main(){ engine eng(engine::kind::cpu,0);
  for (tag t : {tag::nhwc, tag::any}) {
  memory::desc src({64,32,14,14},dt::f16,t), wei({64,32,5,5},dt::f16,tag::any), dst({64,64,14,14},dt::f16,t);
  auto pd = convolution_forward::primitive_desc(eng, prop_kind::forward_training, algorithm::convolution_direct, src, wei, dst, {1,1},{2,2},{2,2});
  auto bpd = convolution_backward_data::primitive_desc(eng, algorithm::convolution_direct, src, wei, dst, {1,1},{2,2},{2,2}, pd);
  memory::desc dw({64,32,5,5},dt::f32,tag::any);
  auto wpd = convolution_backward_weights::primitive_desc(eng, algorithm::convolution_direct, src, dw, dst, {1,1},{2,2},{2,2}, pd);
  printf("f16 tag %d: fwd %s | bwd_data %s | bwd_w %s\n",(int)t,pd.impl_info_str(),bpd.impl_info_str(),wpd.impl_info_str());
  memory::desc a({64,3136},dt::f16,tag::ab), b({3136,1024},dt::f16,tag::ba), c({64,1024},dt::f16,tag::ab);
  printf("matmul f16: %s\n", matmul::primitive_desc(eng,a,b,c).impl_info_str()); }
}
