/* fatbin_data.c - the kernels of src/device/kernels.cu, built by nvcc into
 * a fatbin (for the architectures of COLL_CUDA_ARCHS) and embedded here as
 * read-only data with the assembler's .incbin, so libcoll carries its GPU
 * code without linking any CUDA library (devexec.c loads it). */
#ifdef COLL_HAVE_CUDA
#ifndef COLL_FATBIN_PATH
#error "COLL_FATBIN_PATH (the nvcc -fatbin output) must be defined by the build"
#endif
__asm__(".section .rodata.collDevFatbin,\"a\",@progbits\n"
        ".balign 64\n"
        ".globl collDevFatbin\n"
        ".hidden collDevFatbin\n"
        ".type collDevFatbin, @object\n"
        "collDevFatbin:\n"
        ".incbin \"" COLL_FATBIN_PATH "\"\n"
        ".globl collDevFatbinEnd\n"
        ".hidden collDevFatbinEnd\n"
        "collDevFatbinEnd:\n"
        ".byte 0\n"
        ".previous\n");
#else
typedef int collNoFatbin; /* ISO C wants at least one declaration */
#endif
