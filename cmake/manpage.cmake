# A man page (roff) from `PROG --help`: cmake -DPROG=... -DNAME=... -DVERSION=... -DOUT=... -P manpage.cmake
execute_process(COMMAND ${PROG} --help OUTPUT_VARIABLE help RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${PROG} --help exited ${rc}")
endif()
# roff: a backslash is \e, a line starting with . or ' would be a request
string(REPLACE "\\" "\\e" help "${help}")
string(REGEX REPLACE "\n([.'])" "\n\\\\&\\1" help "${help}")
string(REGEX MATCH "^[^\n]*" first "${help}")
file(WRITE ${OUT}.tmp ".TH ${NAME} 1 \"\" \"gen-model ${VERSION}\" \"User Commands\"\n"
                      ".SH NAME\n${NAME} \\- part of gen-model, Phase 0 of an NPU deployment\n"
                      ".SH DESCRIPTION\n.nf\n${help}.fi\n")
file(RENAME ${OUT}.tmp ${OUT})
