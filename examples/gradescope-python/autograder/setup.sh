#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image: pip from the
# distribution, then gradescope-utils from PyPI. (PIP_BREAK_SYSTEM_PACKAGES: Debian 12's pip
# refuses to install into the system Python otherwise; older pips ignore it.)
set -e
apt-get update -q
apt-get install -y -q --no-install-recommends python3-pip
PIP_BREAK_SYSTEM_PACKAGES=1 pip3 install --no-cache-dir gradescope-utils==0.5.0
