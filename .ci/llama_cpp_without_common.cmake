# Included after each project() of llama-cpp-python's build (CMAKE_PROJECT_INCLUDE, set by .ci/run): llama.cpp without
# its "common" library. The binding loads libllama and libggml alone; common (argument parsing, chat templates, JSON
# schemas: the heaviest C++ of the build) serves llama.cpp's own tools, which are not built, and is not even put
# beside the binding's libraries. llama-cpp-python forces the cache option on (LLAMA_BUILD_COMMON ... FORCE), so a
# -D option cannot turn it off; a normal variable shadows the cache one under CMake's policy CMP0126 (NEW in both
# CMakeLists: cmake_minimum_required 3.21 and 3.14...3.28), which llama.cpp's option() then keeps (CMP0077).
set(LLAMA_BUILD_COMMON OFF)
