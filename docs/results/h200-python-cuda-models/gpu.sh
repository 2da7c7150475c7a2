# The Python half on CUDA with the models (prepared here; run by the device tool, results under $OUT).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 9
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
R=$OUT/r; mkdir -p $R
{ date -u; nvidia-smi; python3 -c "import torch,sys;print(sys.version);print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())"; lscpu | head -20; } > $R/machine.txt 2>&1
timeout 60 python3 -m harness doctor > $R/doctor.txt 2>&1
for m in mlp gru convnet transformer; do
  s=$SECONDS
  timeout 110 python3 -m harness run --preset tiny --device cuda --frontend python --model $m --optimizer sgd,adam,ignite_adam -v --json $R/tiny-$m-cuda.json > $R/tiny-$m-cuda.out.txt 2>&1
  echo "$m exit $? wall $((SECONDS - s)) s" | tee -a $R/exits.txt
  tail -3 $R/tiny-$m-cuda.out.txt
done
tar czf $OUT/results.tgz -C $OUT r
cp $R/exits.txt $OUT/exits.txt
