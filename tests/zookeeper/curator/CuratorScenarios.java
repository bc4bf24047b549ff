// Apache Curator's recipes (Debian's libcurator-*-java) against a ZooKeeper
// ensemble, unchanged: crates/cli/tests/zookeeper_curator.rs runs this
// against a real ZooKeeper 3.8 ensemble and against a bellwether cluster.
//
// Usage: java CuratorScenarios HOST:PORT [HOST:PORT...]
// Client k connects to address k mod n only, so that the contenders of one
// recipe sit on different servers. Every check prints one line,
// "PASS scenario: what held" or "FAIL scenario: what went wrong"; a
// scenario that throws or overruns prints FAIL with the exception. The exit
// status is 0 only when every check passed.

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.cache.ChildData;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.framework.recipes.cache.NodeCache;
import org.apache.curator.framework.recipes.cache.PathChildrenCache;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.shared.SharedCount;
import org.apache.curator.framework.recipes.shared.VersionedValue;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooKeeper;

public final class CuratorScenarios {
    /** How long one wait for a recipe's state (leadership, an event) may take. */
    static final long WAIT_MS = 20_000;
    /** How long one scenario may take in all. */
    static final long SCENARIO_MS = 120_000;

    static String[] addresses;
    static int failures = 0;
    static int passes = 0;

    /** A scenario: its checks call pass or fail. */
    interface Scenario {
        void run(List<CuratorFramework> clients) throws Exception;
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            System.err.println("usage: java CuratorScenarios HOST:PORT [HOST:PORT...]");
            System.exit(2);
        }
        addresses = args;
        scenario("leader-latch", 3, CuratorScenarios::leaderLatch);
        scenario("leader-selector", 3, CuratorScenarios::leaderSelector);
        scenario("mutex", 3, CuratorScenarios::mutex);
        scenario("mutex-reentrant", 2, CuratorScenarios::mutexReentrant);
        scenario("semaphore", 3, CuratorScenarios::semaphore);
        scenario("atomic-long", 3, CuratorScenarios::atomicLong);
        scenario("shared-count", 2, CuratorScenarios::sharedCount);
        scenario("caches", 2, CuratorScenarios::caches);
        scenario("session-expiry", 2, CuratorScenarios::sessionExpiry);
        System.out.println("DONE " + passes + " passed, " + failures + " failed");
        System.out.flush();
        // Curator's and ZooKeeper's threads are not all daemons.
        Runtime.getRuntime().halt(failures == 0 ? 0 : 1);
    }

    /** Client k of a scenario, connected to address k mod n only. */
    static CuratorFramework client(int k) throws InterruptedException {
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(addresses[k % addresses.length])
                .sessionTimeoutMs(15_000)
                .connectionTimeoutMs(10_000)
                .retryPolicy(new ExponentialBackoffRetry(100, 6))
                .build();
        client.start();
        if (!client.blockUntilConnected((int) WAIT_MS, TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("client " + k + " did not connect to "
                    + addresses[k % addresses.length] + " in " + WAIT_MS + " ms");
        }
        return client;
    }

    /** Runs `body` with `count` fresh clients, closing them after. */
    static void scenario(String name, int count, Scenario body) {
        long started = System.nanoTime();
        List<CuratorFramework> clients = new ArrayList<>();
        ExecutorService runner = Executors.newSingleThreadExecutor();
        current = name;
        try {
            for (int k = 0; k < count; k++) {
                clients.add(client(k));
            }
            Future<?> done = runner.submit(() -> {
                body.run(clients);
                return null;
            });
            done.get(SCENARIO_MS, TimeUnit.MILLISECONDS);
        } catch (Throwable error) {
            Throwable cause = error instanceof java.util.concurrent.ExecutionException
                    ? error.getCause() : error;
            fail("threw " + cause);
            cause.printStackTrace();
        } finally {
            runner.shutdownNow();
            for (CuratorFramework client : clients) {
                client.close();
            }
        }
        System.err.printf("scenario %s took %d ms%n", name,
                (System.nanoTime() - started) / 1_000_000);
    }

    static volatile String current = "";

    static synchronized void pass(String what) {
        passes++;
        System.out.println("PASS " + current + ": " + what);
        System.out.flush();
    }

    static synchronized void fail(String what) {
        failures++;
        System.out.println("FAIL " + current + ": " + what);
        System.out.flush();
    }

    static void check(boolean held, String what, String otherwise) {
        if (held) {
            pass(what);
        } else {
            fail(what + " -- but " + otherwise);
        }
    }

    /** Polls `condition` every 20 ms for up to WAIT_MS; whether it held. */
    static boolean eventually(BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + WAIT_MS * 1_000_000;
        while (System.nanoTime() < deadline) {
            if (condition.getAsBoolean()) {
                return true;
            }
            Thread.sleep(20);
        }
        return condition.getAsBoolean();
    }

    static List<String> ids(Collection<Participant> participants) {
        List<String> ids = new ArrayList<>();
        for (Participant participant : participants) {
            ids.add(participant.getId() + (participant.isLeader() ? "*" : ""));
        }
        return ids;
    }

    static List<LeaderLatch> leading(List<LeaderLatch> latches) {
        List<LeaderLatch> leaders = new ArrayList<>();
        for (LeaderLatch latch : latches) {
            if (latch.hasLeadership()) {
                leaders.add(latch);
            }
        }
        return leaders;
    }

    /**
     * Three latches, one per client: exactly one leads, all see the same
     * participants in the same order with that one first and marked leader;
     * the leader's latch closed, the next in that order leads.
     */
    static void leaderLatch(List<CuratorFramework> clients) throws Exception {
        String path = "/curator/latch";
        List<LeaderLatch> latches = new ArrayList<>();
        for (int k = 0; k < clients.size(); k++) {
            LeaderLatch latch = new LeaderLatch(clients.get(k), path, "latch-" + k);
            latches.add(latch);
            latch.start();
        }
        boolean one = eventually(() -> leading(latches).size() == 1);
        // Every latch's node is in before the participants are compared.
        boolean all = eventually(() -> {
            try {
                return latches.get(0).getParticipants().size() == 3;
            } catch (Exception error) {
                return false;
            }
        });
        check(one && all && leading(latches).size() == 1,
                "exactly one of 3 latches has leadership",
                "the leaders are " + leading(latches).size());
        LeaderLatch leader = leading(latches).get(0);
        List<List<String>> seen = new ArrayList<>();
        for (LeaderLatch latch : latches) {
            seen.add(ids(latch.getParticipants()));
        }
        List<String> order = seen.get(0);
        check(seen.get(1).equals(order) && seen.get(2).equals(order),
                "the 3 latches list the same participants in the same order", "they list " + seen);
        check(order.size() == 3 && order.get(0).equals(leader.getId() + "*")
                        && !order.get(1).endsWith("*") && !order.get(2).endsWith("*"),
                "the participants are 3, the first the leader and the only one marked leader",
                "the leader is " + leader.getId() + " and the participants " + order);
        String next = order.get(1);
        leader.close();
        latches.remove(leader);
        boolean moved = eventually(() -> leading(latches).size() == 1
                && leading(latches).get(0).getId().equals(next));
        check(moved, "the leader's latch closed, the next in order (" + next
                        + ") leads within " + WAIT_MS + " ms",
                "the leaders are " + leading(latches).size());
        List<String> after = ids(latches.get(0).getParticipants());
        check(after.equals(List.of(next + "*", order.get(2)))
                        && after.equals(ids(latches.get(1).getParticipants())),
                "both latches left list " + next + " leading then " + order.get(2),
                "they list " + after + " and " + ids(latches.get(1).getParticipants()));
        for (LeaderLatch latch : latches) {
            latch.close();
        }
    }

    /** How many nodes are under `path`, or -1 when they cannot be read. */
    static int queued(CuratorFramework client, String path) {
        try {
            return client.getChildren().forPath(path).size();
        } catch (Exception error) {
            return -1;
        }
    }

    /**
     * Three selectors with autoRequeue lead in turn: never two at once, each
     * at least once, and in strict rotation (a requeued selector queues
     * behind the two already waiting).
     */
    static void leaderSelector(List<CuratorFramework> clients) throws Exception {
        String path = "/curator/selector";
        AtomicInteger leaders = new AtomicInteger();
        AtomicInteger mostLeaders = new AtomicInteger();
        int turnsWanted = 9;
        BlockingQueue<Integer> turns = new LinkedBlockingQueue<>();
        java.util.concurrent.atomic.AtomicBoolean everyoneQueued =
                new java.util.concurrent.atomic.AtomicBoolean();
        List<LeaderSelector> selectors = new ArrayList<>();
        for (int k = 0; k < clients.size(); k++) {
            int who = k;
            LeaderSelector selector = new LeaderSelector(clients.get(k), path,
                    new LeaderSelectorListenerAdapter() {
                        @Override
                        public void takeLeadership(CuratorFramework client) throws Exception {
                            // The first leader waits for the other two to
                            // queue, so the rotation holds from the start.
                            if (!everyoneQueued.get() && !eventually(() -> queued(client, path) == 3)) {
                                throw new IllegalStateException("the 3 selectors never all queued");
                            }
                            everyoneQueued.set(true);
                            int now = leaders.incrementAndGet();
                            mostLeaders.accumulateAndGet(now, Math::max);
                            turns.add(who);
                            Thread.sleep(150);
                            leaders.decrementAndGet();
                        }
                    });
            selector.setId("selector-" + k);
            selector.autoRequeue();
            selectors.add(selector);
        }
        for (LeaderSelector selector : selectors) {
            selector.start();
        }
        List<Integer> order = new ArrayList<>();
        long deadline = System.nanoTime() + 3 * WAIT_MS * 1_000_000;
        while (order.size() < turnsWanted && System.nanoTime() < deadline) {
            Integer turn = turns.poll(100, TimeUnit.MILLISECONDS);
            if (turn != null) {
                order.add(turn);
            }
        }
        for (LeaderSelector selector : selectors) {
            selector.close();
        }
        check(order.size() >= turnsWanted, turnsWanted + " leaderships taken",
                "only " + order + " in " + 3 * WAIT_MS + " ms");
        check(mostLeaders.get() == 1, "never more than one selector leads at once",
                mostLeaders.get() + " led at once");
        Set<Integer> led = new HashSet<>(order);
        check(led.size() == 3, "every selector led", "only " + led + " led: " + order);
        boolean rotation = order.size() >= turnsWanted;
        for (int i = 3; i < order.size(); i++) {
            rotation &= order.get(i).equals(order.get(i - 3));
        }
        check(rotation, "they lead in strict rotation",
                "the order is " + order);
    }

    /**
     * Two threads on each of three clients take one InterProcessMutex 15
     * times each and add one to a plain int under it: no update lost, never
     * two holders.
     */
    static void mutex(List<CuratorFramework> clients) throws Exception {
        String path = "/curator/mutex";
        int threadsPerClient = 2;
        int rounds = 15;
        int[] counter = {0};
        AtomicInteger holders = new AtomicInteger();
        AtomicInteger mostHolders = new AtomicInteger();
        AtomicInteger acquisitions = new AtomicInteger();
        ExecutorService pool = Executors.newFixedThreadPool(clients.size() * threadsPerClient);
        List<Future<?>> workers = new ArrayList<>();
        for (CuratorFramework client : clients) {
            for (int t = 0; t < threadsPerClient; t++) {
                InterProcessMutex lock = new InterProcessMutex(client, path);
                workers.add(pool.submit(() -> {
                    for (int r = 0; r < rounds; r++) {
                        if (!lock.acquire(WAIT_MS, TimeUnit.MILLISECONDS)) {
                            throw new IllegalStateException("no lock in " + WAIT_MS + " ms");
                        }
                        try {
                            mostHolders.accumulateAndGet(holders.incrementAndGet(), Math::max);
                            acquisitions.incrementAndGet();
                            int seen = counter[0];
                            Thread.sleep(1);
                            counter[0] = seen + 1;
                            holders.decrementAndGet();
                        } finally {
                            lock.release();
                        }
                    }
                    return null;
                }));
            }
        }
        for (Future<?> worker : workers) {
            worker.get();
        }
        pool.shutdown();
        int expected = clients.size() * threadsPerClient * rounds;
        check(acquisitions.get() == expected, expected + " acquisitions by 6 threads on 3 clients",
                "there were " + acquisitions.get());
        check(counter[0] == expected, "the unsynchronized counter under the lock reads " + expected,
                "it reads " + counter[0] + ": updates were lost");
        check(mostHolders.get() == 1, "never more than one holder", mostHolders.get() + " held at once");
        List<String> left = clients.get(0).getChildren().forPath(path);
        check(left.isEmpty(), "no lock node is left after every release", "left: " + left);
    }

    /**
     * A mutex taken twice by its thread holds one node; released once it is
     * still held (another client cannot take it), released again it is free.
     */
    static void mutexReentrant(List<CuratorFramework> clients) throws Exception {
        String path = "/curator/reentrant";
        InterProcessMutex mine = new InterProcessMutex(clients.get(0), path);
        InterProcessMutex theirs = new InterProcessMutex(clients.get(1), path);
        boolean first = mine.acquire(WAIT_MS, TimeUnit.MILLISECONDS);
        boolean second = mine.acquire(WAIT_MS, TimeUnit.MILLISECONDS);
        Collection<String> nodes = mine.getParticipantNodes();
        check(first && second && mine.isOwnedByCurrentThread() && nodes.size() == 1,
                "acquired twice by one thread, one lock node",
                "acquired " + first + "/" + second + ", nodes " + nodes);
        mine.release();
        ExecutorService other = Executors.newSingleThreadExecutor();
        boolean taken = other.submit(() -> theirs.acquire(500, TimeUnit.MILLISECONDS)).get();
        check(mine.isOwnedByCurrentThread() && !taken,
                "released once, still held: another client cannot take it in 500 ms",
                "owned " + mine.isOwnedByCurrentThread() + ", other took it " + taken);
        mine.release();
        boolean takenNow = other.submit(() -> theirs.acquire(WAIT_MS, TimeUnit.MILLISECONDS)).get();
        check(!mine.isAcquiredInThisProcess(), "released twice, this process holds it no more",
                "it still does");
        check(takenNow, "released twice, another client takes it", "it could not in " + WAIT_MS + " ms");
        other.submit(() -> {
            theirs.release();
            return null;
        }).get();
        other.shutdown();
    }

    /**
     * Six workers on three clients take leases of an InterProcessSemaphoreV2
     * of 2, four times each: never more than 2 held at once, and 2 reached.
     */
    static void semaphore(List<CuratorFramework> clients) throws Exception {
        String path = "/curator/semaphore";
        int maxLeases = 2;
        int workersPerClient = 2;
        int rounds = 4;
        AtomicInteger held = new AtomicInteger();
        AtomicInteger mostHeld = new AtomicInteger();
        AtomicInteger leases = new AtomicInteger();
        ExecutorService pool = Executors.newFixedThreadPool(clients.size() * workersPerClient);
        List<Future<?>> workers = new ArrayList<>();
        for (CuratorFramework client : clients) {
            for (int w = 0; w < workersPerClient; w++) {
                InterProcessSemaphoreV2 semaphore = new InterProcessSemaphoreV2(client, path, maxLeases);
                workers.add(pool.submit(() -> {
                    for (int r = 0; r < rounds; r++) {
                        Lease lease = semaphore.acquire(WAIT_MS, TimeUnit.MILLISECONDS);
                        if (lease == null) {
                            throw new IllegalStateException("no lease in " + WAIT_MS + " ms");
                        }
                        try {
                            mostHeld.accumulateAndGet(held.incrementAndGet(), Math::max);
                            leases.incrementAndGet();
                            Thread.sleep(50);
                            held.decrementAndGet();
                        } finally {
                            semaphore.returnLease(lease);
                        }
                    }
                    return null;
                }));
            }
        }
        for (Future<?> worker : workers) {
            worker.get();
        }
        pool.shutdown();
        int expected = clients.size() * workersPerClient * rounds;
        check(leases.get() == expected, expected + " leases taken", "only " + leases.get());
        check(mostHeld.get() <= maxLeases, "never more than " + maxLeases + " leases held",
                mostHeld.get() + " were held at once");
        check(mostHeld.get() == maxLeases, maxLeases + " leases held at once at some point",
                "at most " + mostHeld.get() + " were");
    }

    /**
     * Two threads on each of three clients increment one DistributedAtomicLong
     * 10 times: every increment answers a distinct value, and they are 1..60.
     */
    static void atomicLong(List<CuratorFramework> clients) throws Exception {
        String path = "/curator/atomic";
        int threadsPerClient = 2;
        int rounds = 10;
        Set<Long> values = java.util.Collections.synchronizedSet(new HashSet<>());
        AtomicInteger duplicates = new AtomicInteger();
        ExecutorService pool = Executors.newFixedThreadPool(clients.size() * threadsPerClient);
        List<Future<?>> workers = new ArrayList<>();
        for (CuratorFramework client : clients) {
            for (int t = 0; t < threadsPerClient; t++) {
                DistributedAtomicLong number =
                        new DistributedAtomicLong(client, path, new RetryNTimes(20, 10));
                workers.add(pool.submit(() -> {
                    for (int r = 0; r < rounds; r++) {
                        AtomicValue<Long> value = number.increment();
                        for (int attempt = 0; !value.succeeded(); attempt++) {
                            if (attempt == 100) {
                                throw new IllegalStateException("increment never succeeded");
                            }
                            value = number.increment();
                        }
                        if (value.postValue() != value.preValue() + 1 || !values.add(value.postValue())) {
                            duplicates.incrementAndGet();
                        }
                    }
                    return null;
                }));
            }
        }
        for (Future<?> worker : workers) {
            worker.get();
        }
        pool.shutdown();
        long expected = (long) clients.size() * threadsPerClient * rounds;
        Set<Long> wanted = new HashSet<>();
        for (long v = 1; v <= expected; v++) {
            wanted.add(v);
        }
        check(duplicates.get() == 0 && values.equals(wanted),
                "the " + expected + " increments answered 1.." + expected + ", each once",
                duplicates.get() + " repeated, values " + new java.util.TreeSet<>(values));
        long read = new DistributedAtomicLong(clients.get(1), path, new RetryNTimes(3, 10)).get().postValue();
        check(read == expected, "another client reads " + expected, "it reads " + read);
    }

    /**
     * SharedCount: a compare-and-set with the version read succeeds, one with
     * a stale version fails, and the other client's listener sees the value.
     */
    static void sharedCount(List<CuratorFramework> clients) throws Exception {
        String path = "/curator/count";
        SharedCount mine = new SharedCount(clients.get(0), path, 0);
        SharedCount theirs = new SharedCount(clients.get(1), path, 0);
        BlockingQueue<Integer> heard = new LinkedBlockingQueue<>();
        theirs.addListener(new org.apache.curator.framework.recipes.shared.SharedCountListener() {
            @Override
            public void countHasChanged(org.apache.curator.framework.recipes.shared.SharedCountReader reader,
                    int count) {
                heard.add(count);
            }

            @Override
            public void stateChanged(CuratorFramework client, ConnectionState state) {}
        });
        mine.start();
        theirs.start();
        VersionedValue<Integer> read = mine.getVersionedValue();
        boolean set = mine.trySetCount(read, 7);
        boolean stale = mine.trySetCount(read, 8);
        check(set && !stale, "set with the version read succeeds, with that version again fails",
                "first " + set + ", stale " + stale);
        Integer first = heard.poll(WAIT_MS, TimeUnit.MILLISECONDS);
        check(Integer.valueOf(7).equals(first) && eventually(() -> theirs.getCount() == 7),
                "the other client's listener hears 7", "it heard " + first + ", reads " + theirs.getCount());
        mine.close();
        theirs.close();
    }

    static String text(ChildData data) {
        return data == null || data.getData() == null ? "null"
                : new String(data.getData(), StandardCharsets.UTF_8);
    }

    /**
     * CuratorCache, PathChildrenCache and NodeCache on one client see the
     * other client's create, update and delete of a child, in that order.
     */
    static void caches(List<CuratorFramework> clients) throws Exception {
        String root = "/curator/cache";
        String child = root + "/a";
        CuratorFramework watcher = clients.get(0);
        CuratorFramework writer = clients.get(1);
        writer.create().creatingParentsIfNeeded().forPath(root);

        BlockingQueue<String> curatorEvents = new LinkedBlockingQueue<>();
        CountDownLatch curatorReady = new CountDownLatch(1);
        CuratorCache curatorCache = CuratorCache.build(watcher, root);
        curatorCache.listenable().addListener(CuratorCacheListener.builder()
                .forAll((type, before, after) -> {
                    ChildData data = after != null ? after : before;
                    if (data.getPath().equals(child)) {
                        curatorEvents.add(type + " " + text(data));
                    }
                })
                .forInitialized(curatorReady::countDown)
                .build());
        curatorCache.start();

        BlockingQueue<String> childrenEvents = new LinkedBlockingQueue<>();
        PathChildrenCache childrenCache = new PathChildrenCache(watcher, root, true);
        childrenCache.getListenable().addListener((client, event) -> {
            if (event.getData() != null && event.getData().getPath().equals(child)) {
                childrenEvents.add(event.getType() + " " + text(event.getData()));
            }
        });
        childrenCache.start(PathChildrenCache.StartMode.BUILD_INITIAL_CACHE);

        BlockingQueue<String> nodeEvents = new LinkedBlockingQueue<>();
        NodeCache nodeCache = new NodeCache(watcher, child);
        nodeCache.getListenable().addListener(() -> nodeEvents.add(text(nodeCache.getCurrentData())));
        nodeCache.start(true);

        check(curatorReady.await(WAIT_MS, TimeUnit.MILLISECONDS), "CuratorCache initialized",
                "not in " + WAIT_MS + " ms");
        List<String> curatorSeen = new ArrayList<>();
        List<String> childrenSeen = new ArrayList<>();
        List<String> nodeSeen = new ArrayList<>();
        // Each change waits for all three caches to see the last, so that
        // none can fold two into one.
        String[][] steps = {{"create", "1"}, {"set", "2"}, {"delete", ""}};
        for (String[] step : steps) {
            switch (step[0]) {
                case "create" -> writer.create().forPath(child, step[1].getBytes(StandardCharsets.UTF_8));
                case "set" -> writer.setData().forPath(child, step[1].getBytes(StandardCharsets.UTF_8));
                default -> writer.delete().forPath(child);
            }
            curatorSeen.add(curatorEvents.poll(WAIT_MS, TimeUnit.MILLISECONDS));
            childrenSeen.add(childrenEvents.poll(WAIT_MS, TimeUnit.MILLISECONDS));
            nodeSeen.add(nodeEvents.poll(WAIT_MS, TimeUnit.MILLISECONDS));
        }
        Thread.sleep(300);
        curatorSeen.addAll(curatorEvents);
        childrenSeen.addAll(childrenEvents);
        nodeSeen.addAll(nodeEvents);
        check(curatorSeen.equals(List.of("NODE_CREATED 1", "NODE_CHANGED 2", "NODE_DELETED 2")),
                "CuratorCache saw created 1, changed 2, deleted", "it saw " + curatorSeen);
        check(childrenSeen.equals(List.of("CHILD_ADDED 1", "CHILD_UPDATED 2", "CHILD_REMOVED 2")),
                "PathChildrenCache saw added 1, updated 2, removed", "it saw " + childrenSeen);
        check(nodeSeen.equals(List.of("1", "2", "null")),
                "NodeCache saw 1, 2, then no node", "it saw " + nodeSeen);
        curatorCache.close();
        childrenCache.close();
        nodeCache.close();
    }

    /**
     * Client 0's latch leads; its session is expired from outside (a second
     * handle on the same session id and password, closed). Client 1's latch
     * then leads, client 0 hears LOST and loses leadership, its old
     * ephemeral node is gone, and once reconnected it rejoins as follower.
     */
    static void sessionExpiry(List<CuratorFramework> clients) throws Exception {
        String path = "/curator/expiry";
        CuratorFramework doomed = clients.get(0);
        BlockingQueue<ConnectionState> states = new LinkedBlockingQueue<>();
        doomed.getConnectionStateListenable().addListener((client, state) -> states.add(state));
        LeaderLatch first = new LeaderLatch(doomed, path, "first");
        first.start();
        check(first.await(WAIT_MS, TimeUnit.MILLISECONDS), "the first latch leads", "it does not");
        LeaderLatch second = new LeaderLatch(clients.get(1), path, "second");
        second.start();
        check(eventually(() -> {
            try {
                return second.getParticipants().size() == 2;
            } catch (Exception error) {
                return false;
            }
        }) && !second.hasLeadership(), "the second latch joins as follower", "it did not");
        String oldNode = first.getOurPath();

        ZooKeeper handle = doomed.getZookeeperClient().getZooKeeper();
        CountDownLatch connected = new CountDownLatch(1);
        ZooKeeper intruder = new ZooKeeper(addresses[0], 15_000, event -> {
            if (event.getState() == Watcher.Event.KeeperState.SyncConnected) {
                connected.countDown();
            }
        }, handle.getSessionId(), handle.getSessionPasswd());
        boolean attached = connected.await(WAIT_MS, TimeUnit.MILLISECONDS);
        check(attached && intruder.getSessionId() == handle.getSessionId(),
                "a second handle attaches to the first client's session",
                "attached " + attached);
        intruder.close();

        check(second.await(WAIT_MS, TimeUnit.MILLISECONDS),
                "the session closed, the second latch leads within " + WAIT_MS + " ms", "it does not");
        boolean lost = false;
        long deadline = System.nanoTime() + WAIT_MS * 1_000_000;
        while (!lost && System.nanoTime() < deadline) {
            lost = states.poll(100, TimeUnit.MILLISECONDS) == ConnectionState.LOST;
        }
        check(lost, "the first client hears its session LOST", "it heard " + states);
        check(eventually(() -> !first.hasLeadership()), "the first latch no longer leads",
                "it still does");
        String oldName = oldNode.substring(oldNode.lastIndexOf('/') + 1);
        check(eventually(() -> {
            try {
                return !clients.get(1).getChildren().forPath(path).contains(oldName);
            } catch (Exception error) {
                return false;
            }
        }), "the expired session's latch node " + oldName + " is gone", "it is still there");
        check(eventually(() -> {
            try {
                return ids(second.getParticipants()).equals(List.of("second*", "first"));
            } catch (Exception error) {
                return false;
            }
        }) && second.hasLeadership() && !first.hasLeadership(),
                "the first client, on a new session, rejoins behind the second",
                "the participants are " + ids(second.getParticipants()));
        first.close();
        second.close();
    }
}
