# cmake -P script: install, configure the consumer against the prefix, build, run.
function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "step failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()

file(REMOVE_RECURSE ${PREFIX} ${CONSUMER_BUILD} ${CONSUMER_BUILD}-engine ${CONSUMER_BUILD}-missing
     ${CONSUMER_BUILD}-examples)
step(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX})
if(NOT EXISTS ${PREFIX}/include/asgd/engine/trainer.hpp OR NOT EXISTS ${PREFIX}/include/asgd/config.hpp)
  message(FATAL_ERROR "install tree lacks the engine headers or the config header")
endif()
if(EXISTS ${PREFIX}/include/asgd/asgd_build_paths.hpp)
  message(FATAL_ERROR "install tree has the apps' private build paths")
endif()
file(READ ${PREFIX}/include/asgd/config.hpp config)
string(FIND "${config}" "${SOURCE_DIR}" in_source)
if(NOT in_source EQUAL -1)
  message(FATAL_ERROR "the installed config.hpp names the source or build tree")
endif()
# The engine alone, as a project that has none of the other components' packages would ask for it.
step(${CMAKE_COMMAND} -S ${CONSUMER_SOURCE}/../engine_only -B ${CONSUMER_BUILD}-engine -DCMAKE_PREFIX_PATH=${PREFIX}
     -DCMAKE_BUILD_TYPE=Release -DHAVE_MPI=${HAVE_MPI})
step(${CMAKE_COMMAND} --build ${CONSUMER_BUILD}-engine)
step(${CONSUMER_BUILD}-engine/engine_only)
# A component that does not exist, required: the package is not found, and the message names it.
file(WRITE ${CONSUMER_BUILD}-missing/src/CMakeLists.txt
     "cmake_minimum_required(VERSION 3.25)\nproject(missing LANGUAGES CXX)\n"
     "find_package(asgd 0.1 REQUIRED COMPONENTS engine nosuch)\n")
execute_process(COMMAND ${CMAKE_COMMAND} -S ${CONSUMER_BUILD}-missing/src -B ${CONSUMER_BUILD}-missing/build
                        -DCMAKE_PREFIX_PATH=${PREFIX}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "nosuch")
  message(FATAL_ERROR "find_package(asgd REQUIRED COMPONENTS engine nosuch) gave ${rc}:\n${out}\n${err}")
endif()
step(${CMAKE_COMMAND} -S ${CONSUMER_SOURCE} -B ${CONSUMER_BUILD} -DCMAKE_PREFIX_PATH=${PREFIX}
     -DEXPECTED_PREFIX=${PREFIX} -DCMAKE_BUILD_TYPE=Release)
step(${CMAKE_COMMAND} --build ${CONSUMER_BUILD})
step(${CONSUMER_BUILD}/consumer)
# No ASGD_GPU_BACKEND: the module must come from the install, found through the package.
step(${CMAKE_COMMAND} -E env --unset=ASGD_GPU_BACKEND ${CONSUMER_BUILD}/gpu_consumer)

# examples/: built against the install like any outside project; each prints a result checked here.
function(expect_output what regex)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${what}:\n${out}")
  if(NOT rc EQUAL 0 OR NOT out MATCHES "${regex}")
    message(FATAL_ERROR "${what} (exit ${rc}) did not print what it should (${regex}):\n${out}\n${err}")
  endif()
endfunction()
set(examples ${CONSUMER_BUILD}-examples)
step(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples -B ${examples} -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_BUILD_TYPE=Release)
step(${CMAKE_COMMAND} --build ${examples})
file(MAKE_DIRECTORY ${examples}/work)
expect_output("examples/recommender"
  "stopped: yes after epoch ([4-9]|1[01]) of 12\nresumed from mf.ckpt at epoch ([4-9]|1[01])\ntrained to epoch 12: test RMSE 0\\.[5-9][0-9]*[^\n]*\nserved from segment \\(pid [0-9]+\\): top 5 for u7:( i[0-9]+ \\([0-9.-]+\\))+\n"
  ${examples}/recommender ${examples}/work)
set(two_ranks_result "2 ranks, ring allreduce, averaging models every epoch: 10000 of 20000 examples on rank 0, 6 averaging rounds\nobjective 0\\.[0-9]+, accuracy 0\\.[0-9]+ on the whole set after 5 epochs; every rank holds this model\n")
expect_output("examples/two_ranks (threads)" "${two_ranks_result}" ${examples}/two_ranks)
if(HAVE_MPI AND MPIEXEC)
  expect_output("examples/two_ranks (mpiexec -n 2)" "${two_ranks_result}"
    ${CMAKE_COMMAND} -E env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_plm=isolated
    OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
    ${MPIEXEC} -n 2 ${examples}/two_ranks)
endif()
