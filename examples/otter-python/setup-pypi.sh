#!/usr/bin/env bash
# Used instead of the autograder's own setup.sh (suite.yaml's `setup:`): Otter-Grader's downloads
# Miniforge from GitHub and builds a conda environment, and GitHub is out of reach here. The
# same Python packages come from Debian and PyPI instead; run_autograder (unmodified) then finds
# no `mamba`, goes on, and runs run_otter.py with this `python`.
set -e
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends python3-pip python-is-python3 ca-certificates
update-ca-certificates
apt-get clean && rm -rf /var/lib/apt/lists/*
# environment.yml's pip requirement (otter-grader[grading,plugins]==VERSION), from PyPI.
requirement=$(sed -n 's/^ *- *\(otter-grader.*\)$/\1/p' /autograder/source/environment.yml)
# (No .pyc files and no cache: the environment's layer stays well inside setup.sh's 1 GiB.)
pip install --break-system-packages --no-cache-dir --no-compile "$requirement"
