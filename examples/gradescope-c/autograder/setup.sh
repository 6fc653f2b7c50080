#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image.
apt-get update
apt-get install -y gcc
