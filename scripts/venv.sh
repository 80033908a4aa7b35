# Shared by scripts/*.sh: find a Python and keep a virtualenv in .venv with the project installed.
VENV=${DBJOBS_VENV:-.venv}

pick_python() {
  # Newest supported Python first: Django 6 needs 3.12+; 3.10 and 3.11 get Django 5.2.
  # DBJOBS_PYTHON (e.g. python3.11) asks for one version.
  for candidate in ${DBJOBS_PYTHON:-python3.13 python3.12 python3.11 python3.10 python3}; do
    for version in $(pyenv versions --bare 2>/dev/null | grep -E "^${candidate#python}" | sort -rV); do
      if PYENV_VERSION=$version "$candidate" -c 'import sys; assert sys.version_info >= (3, 10)' 2>/dev/null; then
        echo "env PYENV_VERSION=$version $candidate"; return
      fi
    done
    if command -v "$candidate" >/dev/null && "$candidate" -c 'import sys; assert sys.version_info >= (3, 10)' 2>/dev/null; then
      echo "$candidate"; return
    fi
  done
  echo "No Python 3.10+ found." >&2
  return 1
}

ensure_venv() {  # extras
  if [ ! -x "$VENV/bin/python" ]; then
    local python
    python=$(pick_python) || return 1
    echo "Creating $VENV with $($python --version)"
    $python -m venv "$VENV" || return 1
    "$VENV/bin/python" -m pip install -q --upgrade pip || return 1
  fi
  install_extra "$1"
}

install_extra() {  # extras; reinstalls only when pyproject.toml changed
  local stamp="$VENV/.installed-$1"
  if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    echo "Installing django-dbjobs[$1] into $VENV"
    # DBJOBS_DJANGO pins Django, e.g. "Django>=5.2,<6.0" for the LTS run.
    "$VENV/bin/python" -m pip install -q -e ".[$1]" ${DBJOBS_DJANGO:+"$DBJOBS_DJANGO"} || return 1
    touch "$stamp"
  fi
}

have_mysql_headers() {
  pkg-config --exists mariadb 2>/dev/null || pkg-config --exists mysqlclient 2>/dev/null \
    || "$VENV/bin/python" -c "import MySQLdb" 2>/dev/null
}
