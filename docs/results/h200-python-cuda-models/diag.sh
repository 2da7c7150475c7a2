set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 9
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
timeout 130 python3 .whl/diag.py cuda 2>&1 | tee $OUT/diag.txt
echo "diag exit ${PIPESTATUS[0]}" | tee -a $OUT/diag.txt
timeout 80 python3 -X faulthandler -m harness run --preset tiny --device cuda --frontend python --model gru --optimizer sgd --mode default --no-trace -v --debug > $OUT/gru-one-cell.txt 2>&1
echo "gru one cell exit $?" | tee -a $OUT/gru-one-cell.txt
tail -40 $OUT/gru-one-cell.txt
