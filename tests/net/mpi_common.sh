# What the MPI scripts share (sourced by mpi_apps.sh and mpi_ps.sh, after they set asgd and mpiexec): a work
# folder removed at exit, Open MPI allowed to run as root and oversubscribed, fail and mpi, and small
# generated data.
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
fail() { echo "FAIL: $*"; [[ -f "$work/log" ]] && cat "$work/log"; exit 1; }
mpi() { local n="$1"; shift; timeout 120 "$mpiexec" --oversubscribe -n "$n" "$asgd" "$@"; }

# write_corpus FILE: 3,000 sentences of 12 words over two topics of 20 words each (a0..a19, b0..b19).
write_corpus() {
  awk 'BEGIN { srand(7); for (s = 0; s < 3000; s++) { t = int(rand() * 2); line = "";
         for (w = 0; w < 12; w++) line = line (w ? " " : "") (t ? "b" : "a") int(rand() * 20); print line } }' \
    > "$1"
}

# write_digits DIR: 600 training and 200 test digits in MNIST's idx format, each class a bright bar at its own
# place.
write_digits() {
  perl -e '
    my $dir = shift;
    srand(11);
    for my $set (["train", 600], ["t10k", 200]) {
      my ($name, $n) = @$set;
      open(my $img, ">", "$dir/$name-images-idx3-ubyte") or die; binmode $img;
      open(my $lab, ">", "$dir/$name-labels-idx1-ubyte") or die; binmode $lab;
      print $img pack("N4", 0x803, $n, 28, 28); print $lab pack("N2", 0x801, $n);
      for (1 .. $n) {
        my $c = int(rand(10)); my @p = map { int(rand(60)) } 1 .. 784;
        my ($y, $x) = (3 + int($c / 5) * 12, 2 + ($c % 5) * 5);
        for my $dy (0 .. 5) { for my $dx (0 .. 3) { $p[($y + $dy) * 28 + $x + $dx] = 250 } }
        print $img pack("C*", @p); print $lab pack("C", $c);
      }
    }' "$1"
}
