"""Code-generating backends (cpu: C++/OpenMP; gpu: Triton) and the toolchain facts they need."""
