import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

/**
 * What the Java client scenarios (tests/clients/spymemcached, tests/clients/xmemcached) share:
 * one line per step, "step<TAB>result", the result being what the client returned or the
 * exception's class and message; and a serializable value for the transcoders.
 */
public final class Steps {
  private Steps() {}

  public interface Step { Object run() throws Exception; }

  public static void step(String name, Step s) {
    String r;
    try {
      r = show(s.run());
    } catch (Exception e) {
      Throwable t = e instanceof java.util.concurrent.ExecutionException && e.getCause() != null ? e.getCause() : e;
      r = "exception " + t.getClass().getSimpleName() + ": " + t.getMessage();
    }
    System.out.println(name + "\t" + r);
  }

  static String show(Object o) {
    if (o == null) return "null";
    if (o instanceof byte[]) return "byte[" + ((byte[]) o).length + "]";
    if (o instanceof String && ((String) o).length() > 64) return "String(" + ((String) o).length() + ")";
    return o.getClass().getSimpleName() + ":" + o;
  }

  public interface Round { int run(int thread, int round) throws Exception; }

  /** Runs round(t, r) for r in 0..rounds-1 on each of `threads` threads at once; the sum of what
   *  the rounds return (their failures). */
  public static int concurrently(int threads, int rounds, Round round) throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    try {
      List<Future<Integer>> fs = new ArrayList<>();
      for (int t = 0; t < threads; t++) {
        final int id = t;
        fs.add(pool.submit(() -> {
          int bad = 0;
          for (int r = 0; r < rounds; r++) bad += round.run(id, r);
          return bad;
        }));
      }
      int bad = 0;
      for (Future<Integer> f : fs) bad += f.get(120, TimeUnit.SECONDS);
      return bad;
    } finally {
      pool.shutdown();
    }
  }

  public static class Point implements Serializable {
    private static final long serialVersionUID = 1L;
    final int x, y;
    public Point(int x, int y) { this.x = x; this.y = y; }
    @Override public String toString() { return "Point(" + x + "," + y + ")"; }
  }
}
