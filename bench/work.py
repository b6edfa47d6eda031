import collections, json, re
words = [f"w{i % 997}" for i in range(200000)]
counts = collections.Counter(words)
text = json.dumps({k: v for k, v in counts.items()})
data = json.loads(text)
print(len(data), len(re.findall(r"w[0-9]+", " ".join(words[:50000]))))
