#!/usr/bin/perl
# A bench baseline (see node-loop.ts, MODE=helper): the smallest process that can spawn
# commands for a Node process. Perl (perl-base, in every Debian) forks a 5 MB process where
# Node forks its whole heap. Frames both ways are a 4-byte big-endian length and a payload:
#   in:  "id\0cwd\0command\0" . stdin   — runs `sh -c command` in its own process group
#   out: "id\0code"                      — it exited and its stdout and stderr are closed
# Requests are handled one at a time: the loop that drives it runs one command at a time.
use strict;
use warnings;
use POSIX ();

binmode STDIN;
binmode STDOUT;
$| = 1;

sub read_exactly {
  my ($len) = @_;
  my $buf = "";
  while (length($buf) < $len) {
    my $n = sysread(STDIN, $buf, $len - length($buf), length($buf));
    exit 0 unless $n;    # the Node process is gone
  }
  return $buf;
}

while (1) {
  my $len = unpack("N", read_exactly(4));
  my ($id, $cwd, $command, $stdin) = split /\0/, read_exactly($len), 4;
  pipe(my $in_r, my $in_w) or die "pipe: $!";
  pipe(my $out_r, my $out_w) or die "pipe: $!";
  my $pid = fork() // die "fork: $!";
  if ($pid == 0) {
    POSIX::setsid();
    chdir($cwd) or POSIX::_exit(127);
    POSIX::dup2(fileno($in_r), 0);
    POSIX::dup2(fileno($out_w), 1);
    POSIX::dup2(fileno($out_w), 2);
    { no warnings "exec"; exec { "/bin/sh" } "sh", "-c", $command; }
    POSIX::_exit(127);
  }
  close $in_r;
  close $out_w;
  {
    local $SIG{PIPE} = "IGNORE";    # a command that does not read its stdin
    syswrite($in_w, $stdin // "");
  }
  close $in_w;
  my $junk;
  1 while sysread($out_r, $junk, 65536);
  close $out_r;
  waitpid($pid, 0);
  my $reply = join("\0", $id, $? & 127 ? -1 : $? >> 8);
  syswrite(STDOUT, pack("N", length $reply) . $reply);
}
