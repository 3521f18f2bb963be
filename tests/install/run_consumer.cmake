# cmake -P script: install, configure the consumer against the prefix, build, run.
function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "step failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()

file(REMOVE_RECURSE ${PREFIX} ${CONSUMER_BUILD})
step(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX})
if(NOT EXISTS ${PREFIX}/include/asgd/engine/trainer.hpp OR NOT EXISTS ${PREFIX}/include/asgd/config.hpp)
  message(FATAL_ERROR "install tree lacks the engine headers or the config header")
endif()
step(${CMAKE_COMMAND} -S ${CONSUMER_SOURCE} -B ${CONSUMER_BUILD} -DCMAKE_PREFIX_PATH=${PREFIX}
     -DCMAKE_BUILD_TYPE=Release)
step(${CMAKE_COMMAND} --build ${CONSUMER_BUILD})
step(${CONSUMER_BUILD}/consumer)
