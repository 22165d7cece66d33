#!/usr/bin/env bash
# The GPU checks as one prepared run on a machine with a CUDA device (the device tool's H200, or any GPU box
# with torch+CUDA, PyG, numba, pyarrow, safetensors, pytest, httpx): the gpu-marked tests, then
# benchmarks/gpu.py; logs and the benchmark's JSON land in $OUT (default: bench-out/gpu-check).
#
# graphshard's packages that such a machine may lack travel as wheels in .whl/ (ignored by git). Made once,
# here, in the repository's root, for the device's Python 3.12 on x86-64:
#
#   echo /.whl/ >> .git/info/exclude; echo /.gpudata/ >> .git/info/exclude
#   mkdir -p .gpudata && cp -r ../shared/data/cora ../shared/data/citeseer ../shared/data/pubmed .gpudata/
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#       -d .whl pymetis kaminpar starlette uvicorn
#
# (the tests read Cora, CiteSeer and PubMed from .gpudata/: ../shared does not travel). Then, with the device
# tool (10 minutes a call): run(command="bash benchmarks/gpu_check.sh tests", carry=[".whl", ".gpudata"],
# timeout_s=330) and run(command="bash benchmarks/gpu_check.sh bench", carry=[".whl"], timeout_s=540); with no
# argument both run, one after the other. GPU_CHECK_DIMS=128 runs the benchmark's 128-d cells only.
set -u -o pipefail
OUT="${OUT:-bench-out/gpu-check}"
mkdir -p "$OUT"
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || exit 1
    export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD/src:$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
[ -d .gpudata ] && export GRAPHSHARD_SHARED_DATA="$PWD/.gpudata"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tee "$OUT/gpu.txt"
python3 -c "import torch, torch_geometric; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
'pyg', torch_geometric.__version__, 'devices', torch.cuda.device_count())" 2>&1 | tee -a "$OUT/gpu.txt"
what="${1:-all}"
tests=0 bench=0
if [ "$what" != bench ]; then
    timeout 300 python3 -m pytest -q -m gpu tests/gpu -p no:cacheprovider 2>&1 | tee "$OUT/gpu-tests.log"
    tests=$?
fi
if [ "$what" != tests ]; then
    timeout 500 python3 benchmarks/gpu.py --dims "${GPU_CHECK_DIMS:-32,128}" --work /tmp/gpu-bench \
        --json "$OUT/gpu.json" 2>&1 | tee "$OUT/gpu-bench.log"
    bench=$?
fi
echo "gpu tests exit $tests, benchmark exit $bench"
exit $((tests || bench))
