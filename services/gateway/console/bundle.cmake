# cmake -DSOURCE=services/gateway/console -DOUTPUT=BUILD/share/tessera/console -P bundle.cmake
# The console's files, flat, as the gateway serves them at /assets/: its own (src/) and uPlot's
# distribution (from npm, installed by deploy/install-deps.sh). The folder is made anew, so a file
# removed from src/ is not served on.
set(uplot ${SOURCE}/node_modules/uplot/dist)
if(NOT EXISTS ${uplot}/uPlot.esm.js OR NOT EXISTS ${uplot}/uPlot.min.css)
  message(FATAL_ERROR
    "the web console needs uPlot from npm, which is not installed in ${SOURCE}/node_modules: "
    "run deploy/install-deps.sh (it runs `npm ci` there)")
endif()
file(REMOVE_RECURSE ${OUTPUT})
file(MAKE_DIRECTORY ${OUTPUT})
file(GLOB own ${SOURCE}/src/*)
file(COPY ${own} ${uplot}/uPlot.esm.js ${uplot}/uPlot.min.css DESTINATION ${OUTPUT})
