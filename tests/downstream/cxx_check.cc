// A C++ program of an NPU project's host code: every public header of the
// runtime included as it is (each declares its functions extern "C"), and
// functions of several of them called, so that linking finds their C names.
#include <cstdio>

#include "gm/bf16.h"
#include "gm/buf.h"
#include "gm/cli.h"
#include "gm/config.h"
#include "gm/cpu.h"
#include "gm/embedded.h"
#include "gm/io.h"
#include "gm/json.h"
#include "gm/kernels.h"
#include "gm/lock.h"
#include "gm/npy.h"
#include "gm/pool.h"
#include "gm/quant.h"
#include "gm/registry.h"
#include "gm/rope.h"
#include "gm/runner.h"
#include "gm/safetensors.h"
#include "gm/status.h"
#include "gm/tokenizer.h"
#include "gm/utf8.h"
#include "gm/weights.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        std::fprintf(stderr, "usage: cxx_check TOKENS.npy\n");
        return 2;
    }
    gm_status st{};
    gm_npy a{};
    if (gm_npy_read(argv[1], &a, &st) != 0) {
        std::fprintf(stderr, "cxx_check: %s\n", st.msg);
        return 1;
    }
    rt_result_free(nullptr);
    gm_pool *p = gm_pool_new(1);
    gm_pool_free(p);
    std::printf("cxx_check: %lld tokens read, kernels %s, bf16(1.0f) 0x%04x\n", static_cast<long long>(a.count),
                gm_kernels_name(), gm_f32_to_bf16(1.0f));
    gm_npy_free(&a);
    return 0;
}
