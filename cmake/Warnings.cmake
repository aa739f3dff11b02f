# One place for compiler warnings so every target gets the same set; CI adds -Werror.
add_library(rt_warnings INTERFACE)
target_compile_options(rt_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align -Wunused -Woverloaded-virtual -Wnull-dereference -Wimplicit-fallthrough>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${RINGTRAIN_WERROR}>>:-Werror>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${RINGTRAIN_WERROR}>>:-Werror=all-warnings>)
add_library(rt_native INTERFACE)
if(RINGTRAIN_NATIVE)
  target_compile_options(rt_native INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-march=native>)
endif()
