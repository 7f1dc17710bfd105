# pick_python MODULES: prints the python to test the Python client with (sourced by bash):
# $JOBBUF_PYTHON, else the first python3 on PATH that imports MODULES (a comma-separated list,
# e.g. "celery, psycopg2"), else /usr/bin/python3 (Debian's, where scripts/install-deps.sh puts them).
pick_python() {
  local p
  for p in ${JOBBUF_PYTHON:-} $(command -v python3) /usr/bin/python3; do
    "$p" -c "import $1" 2>/dev/null && { echo "$p"; return; }
  done
  echo /usr/bin/python3
}
