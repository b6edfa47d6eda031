# kernel-matrix.sh's --pid case: attaches to a waiting fixture, lets it
# allocate once memtrack says it records, and waits for both to end.
# Usage: sh kernel-matrix-pid.sh MEMTRACK FX_LIBC OUTPUT
MT=$1 FX=$2 OUT=$3
dir=$(mktemp -d)
"$FX" waitcount 2000 > "$dir/fixture.out" &
fixture=$!
i=0
until grep -q '^ready' "$dir/fixture.out" 2>/dev/null; do
  i=$((i + 1)); [ $i -lt 600 ] || { echo "the fixture never got ready"; kill $fixture; exit 1; }; sleep 0.1
done
"$MT" record --pid "$fixture" -o "$OUT" 2> "$dir/record.err" &
recorder=$!
i=0
until grep -q 'recording' "$dir/record.err" 2>/dev/null; do
  i=$((i + 1))
  [ $i -lt 600 ] || { echo "memtrack never started recording"; cat "$dir/record.err"; kill $fixture; exit 1; }
  sleep 0.1
done
kill -USR1 "$fixture"
wait "$recorder"
status=$?
cat "$dir/record.err"
rm -rf "$dir"
exit $status
