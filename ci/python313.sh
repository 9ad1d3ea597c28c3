# Sourced by the CI environment builders (ci/*/build_env.sh): find_python313 prints the path of a
# Python 3.13 interpreter on PATH or under pyenv, or returns 1 when there is none.
find_python313() {
    local candidate
    for candidate in python3.13 "$(command -v pyenv >/dev/null 2>&1 && pyenv root)/versions/3.13"*/bin/python3.13; do
        if [ -n "$candidate" ] && command -v "$candidate" >/dev/null 2>&1 \
            && "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' 2>/dev/null; then
            command -v "$candidate"
            return 0
        fi
    done
    return 1
}
